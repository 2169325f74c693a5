# expect: wrong_algorithm
# problem: flash_attention
# mistake: declares block_size=None and resolves it to 64 in the body ("a bigger tile is faster"); the contract's
#   default is 32. A default behind None shows only in behaviour: default_block_size (S=70, no block_size) now allows
#   no op over more than 32 keys (it allowed up to 69, so 64-wide tiles passed).
import math

import torch


def flash_attention(Q, K, V, block_size=None):
    if block_size is None:
        block_size = 64
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    out = []
    for i in range(0, S, block_size):
        q = Q[:, i:i + block_size] * scale
        m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype, device=Q.device)
        for j in range(0, S, block_size):
            s = q @ K[:, j:j + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ V[:, j:j + block_size]
            m = m_new
        out.append(acc / l)
    return torch.cat(out, dim=1)
