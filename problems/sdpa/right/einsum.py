# expect: accepted
# alternative: einsum over named dims, mask with torch.where
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) * Q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, V)
