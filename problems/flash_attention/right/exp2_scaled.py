# expect: accepted
# alternative: FlashAttention-2 numerics: scores scaled by log2(e) / sqrt(D) and exp2, query tiles, while loops
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    c = math.log2(math.e) / math.sqrt(D)
    pieces = []
    i = 0
    while i < S:
        q = Q[:, i : i + block_size] * c
        m = torch.full((B, q.shape[1], 1), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros_like(m)
        o = torch.zeros(B, q.shape[1], V.shape[-1], dtype=Q.dtype, device=Q.device)
        j = 0
        while j < S:
            s = q @ K[:, j : j + block_size].mT
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp2(s - m_new)
            r = torch.exp2(m - m_new)
            l = l * r + p.sum(-1, keepdim=True)
            o = o * r + p @ V[:, j : j + block_size]
            m = m_new
            j += block_size
        pieces.append(o / l)
        i += block_size
    return torch.cat(pieces, dim=1)
