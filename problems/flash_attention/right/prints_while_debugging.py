# expect: accepted
# alternative: keys_outer_loop with a debug print of two output elements (printing a tensor imports torch code that builds a namedtuple, inside the grader's guards)
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    f32 = torch.promote_types(Q.dtype, torch.float32)
    m = torch.full((B, S, 1), float("-inf"), dtype=f32, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=f32, device=Q.device)
    acc = torch.zeros_like(V, dtype=f32)
    for ks in range(0, S, block_size):
        s = torch.einsum("bqd,bkd->bqk", Q, K[:, ks : ks + block_size]) / math.sqrt(D)  # (B, S, bk)
        s = s.to(f32)
        m_new = torch.maximum(m, s.max(-1, keepdim=True).values)
        p = (s - m_new).exp()
        alpha = (m - m_new).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, ks : ks + block_size].to(f32)
        m = m_new
    out = (acc / l).to(V.dtype)
    print("first:", out.reshape(-1)[:2])
    return out
