# expect: wrong_answer
# mistake: clamps the denominator at eps instead of adding eps to it
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = k.transpose(1, 2) @ V  # (B, Dk, Dv)
    den = q @ k.sum(1, keepdim=True).transpose(1, 2)  # (B, S, 1)
    return (q @ kv) / den.clamp(min=eps)
