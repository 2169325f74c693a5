# expect: wrong_answer
# mistake: phi = elu (can be negative, so the denominator can vanish)
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q), F.elu(K)
    kv, z = k.transpose(1, 2) @ V, k.sum(1)
    return (q @ kv) / ((q * z[:, None]).sum(-1, keepdim=True) + eps)
