# expect: accepted
# alternative: Z taken as the last prefix sum of phi(K) (a cumsum over S is S adds: linear work, as a causal
# linear attention's running sums are)
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1           # (B, S, D)
    kv = k.transpose(1, 2) @ V                  # (B, D, Dv)
    z = k.cumsum(1)[:, -1]                      # (B, D): the sum over all keys
    return (q @ kv) / ((q * z[:, None, :]).sum(-1, keepdim=True) + eps)
