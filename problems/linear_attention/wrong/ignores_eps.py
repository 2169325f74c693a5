# expect: wrong_answer
# mistake: hard-codes eps = 1e-6 instead of using the argument
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(1)
    return (q @ kv) / ((q * z[:, None]).sum(-1, keepdim=True) + 1e-6)
