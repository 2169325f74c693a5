# expect: accepted
# alternative: HF style: scores in float32, masked with torch.finfo(float32).min, cast back before @ V
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = Q.shape[-1] ** -0.5
    scores = torch.matmul(Q.float(), K.float().transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)
    weights = torch.softmax(scores, dim=-1).to(V.dtype)
    return torch.matmul(weights, V)
