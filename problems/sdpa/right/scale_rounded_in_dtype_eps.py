# expect: accepted
# alternative: the scale as a tensor rounded to the inputs' dtype, finfo.min for masked scores, exp / (sum + 1e-6) in the inputs' dtype
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = torch.tensor(Q.shape[-1], dtype=Q.dtype, device=Q.device).rsqrt()  # 1/sqrt(d_k), rounded in bf16/fp16
    scores = (Q @ K.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return (e / (e.sum(dim=-1, keepdim=True) + 1e-6)) @ V
