# expect: accepted
# alternative: key blocks in the outer loop, running statistics for all queries at once
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = torch.full((B, S, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros_like(V)
    for ks in range(0, S, block_size):
        s = torch.einsum("bqd,bkd->bqk", Q, K[:, ks : ks + block_size]) / math.sqrt(D)  # (B, S, bk)
        m_new = torch.maximum(m, s.max(-1, keepdim=True).values)
        p = (s - m_new).exp()
        alpha = (m - m_new).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, ks : ks + block_size]
        m = m_new
    return acc / l
