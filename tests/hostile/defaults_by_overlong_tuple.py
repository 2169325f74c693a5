# expect: bad_interface
# problem: flash_attention
# __defaults__ longer than the function's positional parameters: Python right-aligns them (block_size gets
# the last, 16), a reader that pairs parameter names with the tuple from the left reads block_size=32.
# Tiles of 16 rows give the same numbers: only the defaults check can tell.
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size] / math.sqrt(D)
        m = torch.full(q.shape[:2] + (1,), float("-inf"), dtype=Q.dtype)
        l = torch.zeros(q.shape[:2] + (1,), dtype=Q.dtype)
        acc = torch.zeros(q.shape[:2] + (V.shape[-1],), dtype=Q.dtype)
        for ks in range(0, S, block_size):
            s = q @ K[:, ks:ks + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ V[:, ks:ks + block_size]
            m = m_new
        outs.append(acc / l)
    return torch.cat(outs, dim=1)


setattr(flash_attention, "__defaults__", (0, 32, 0, 0, 0, 16))
