# expect: accepted
# alternative: Z taken as the last prefix sum of phi(K) (a cumsum over S is S adds: linear work, as a causal
# linear attention's running sums are). The running sum is kept in float32: on CUDA a bfloat16 cumsum over
# hundreds of keys adds in bfloat16, drops the small terms once the sum is large, and came out a systematic 2%
# small (rejected there as "leans one way"; the CPU adds in float32 either way)
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1           # (B, S, D)
    kv = k.transpose(1, 2) @ V                  # (B, D, Dv)
    z = k.float().cumsum(1)[:, -1].to(k.dtype)  # (B, D): the sum over all keys
    return (q @ kv) / ((q * z[:, None, :]).sum(-1, keepdim=True) + eps)
