# expect: accepted
# alternative: keeps the output normalised after every block (o = o * l_old * alpha / l_new + p @ v / l_new),
# in float32 (Q.new_* then .float())
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = Q.new_full((B, S, 1), float("-inf")).float()
    l = Q.new_zeros((B, S, 1)).float()
    o = Q.new_zeros((B, S, V.shape[-1])).float()
    for start in range(0, S, block_size):
        kb, vb = K[:, start : start + block_size], V[:, start : start + block_size]
        s = torch.einsum("bqd,bkd->bqk", Q, kb).float() / math.sqrt(D)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        scaled_old = l * torch.exp(m - m_new)
        l_new = scaled_old + p.sum(-1, keepdim=True)
        o = o * (scaled_old / l_new) + (p @ vb.float()) / l_new
        m, l = m_new, l_new
    return o.to(Q.dtype)
