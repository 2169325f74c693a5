# expect: accepted
# alternative: keeps the output normalised after every block (o = o * l_old * alpha / l_new + p @ v / l_new)
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = Q.new_full((B, S, 1), float("-inf"))
    l = Q.new_zeros((B, S, 1))
    o = Q.new_zeros((B, S, V.shape[-1]))
    for start in range(0, S, block_size):
        kb, vb = K[:, start : start + block_size], V[:, start : start + block_size]
        s = torch.einsum("bqd,bkd->bqk", Q, kb) / math.sqrt(D)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        scaled_old = l * torch.exp(m - m_new)
        l_new = scaled_old + p.sum(-1, keepdim=True)
        o = o * (scaled_old / l_new) + (p @ vb) / l_new
        m, l = m_new, l_new
    return o
