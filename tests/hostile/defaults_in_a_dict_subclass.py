# expect: bad_interface
# problem: flash_attention
# block_size is keyword-only, 32 in the def; its keyword defaults are replaced (through a name built from pieces)
# by a dict subclass holding 64. Python calls with the dict's entries; a reader that took only exact dicts read
# nothing, and the kernel's values do not depend on the tile size.
import math

import torch


def flash_attention(Q, K, V, *, block_size=32):
    B, S, D = Q.shape
    m = torch.full((B, S, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros_like(V)
    for ks in range(0, S, block_size):
        s = Q @ K[:, ks:ks + block_size].transpose(1, 2) / math.sqrt(D)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = (s - m_new).exp(), (m - m_new).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, ks:ks + block_size]
        m = m_new
    return acc / l


class _Defaults(dict):
    pass


setattr(flash_attention, "__kwdef" + "aults__", _Defaults(block_size=64))
