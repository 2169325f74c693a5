# expect: wrong_answer
# mistake: sums phi(K) over the feature dim instead of over positions
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    z = k.sum(-1, keepdim=True)  # (B, S, 1)
    return (q @ kv) / (z + eps)
