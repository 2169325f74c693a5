# expect: too_much_memory
# mistake: right values, but builds phi(Q) phi(K)^T: the S x S matrix linear attention exists to avoid
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    scores = q @ k.transpose(1, 2)  # (B, S, S)
    return (scores @ V) / (scores.sum(-1, keepdim=True) + eps)
