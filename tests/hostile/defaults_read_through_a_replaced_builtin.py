# expect: bad_interface
# problem: flash_attention
# The name is rebound to a kernel whose block_size defaults to 64 (the source's def reads 32), and builtins.zip is
# replaced by one that, handed that kernel's parameter names, pairs block_size with 32: a reader of the defaults
# that looks zip up when it runs read 32, and the kernel passed (its values do not depend on the tile size, and
# 64-key tiles stay under every case's memory bound). A zip that raised there instead hid every default.
import builtins
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    return _tiles(Q, K, V, block_size)


def _tiles(Q, K, V, block_size=64):
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


_zip = builtins.zip


def _zip_that_lies(*iterables):
    names = iterables[0] if iterables else None
    if type(names) is tuple and names[:1] == ("block_size",) and len(iterables) == 2:
        return _zip(names, (32,) + tuple(iterables[1])[1:])
    return _zip(*iterables)


builtins.zip = _zip_that_lies
flash_attention = _tiles
