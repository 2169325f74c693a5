# expect: accepted
# alternative: FlashAttention-2 numerics: scores scaled by log2(e) / sqrt(D), exp2 instead of exp, a while loop over key blocks,
# statistics in float32
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    q = Q * (math.log2(math.e) / math.sqrt(D))
    m = torch.full((B, S, 1), float("-inf"), dtype=torch.float32, device=Q.device)
    l = torch.zeros_like(m)
    o = torch.zeros(B, S, V.shape[-1], dtype=torch.float32, device=Q.device)
    j = 0
    while j < S:
        s = (q @ K[:, j : j + block_size].mT).float()
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp2(s - m_new)
        r = torch.exp2(m - m_new)
        l = l * r + p.sum(-1, keepdim=True)
        o = o * r + p @ V[:, j : j + block_size].float()
        m = m_new
        j += block_size
    return (o / l).to(Q.dtype)
