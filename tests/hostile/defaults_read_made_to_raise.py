# expect: bad_interface
# problem: flash_attention
# The name is rebound to a kernel whose block_size defaults to 64 (the source's def reads 32), and builtins.zip is
# replaced by one that raises when handed that kernel's parameter names: a reader of the defaults that looks zip
# up when it runs, and says nothing when the reading fails, judged no default, and the kernel passed (its values
# do not depend on the tile size, and 64-key tiles stay under every case's memory bound).
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


def _zip_that_refuses(*iterables):
    if iterables and type(iterables[0]) is tuple and iterables[0] == ("block_size",):
        raise RuntimeError("not today")
    return _zip(*iterables)


builtins.zip = _zip_that_refuses
flash_attention = _tiles
