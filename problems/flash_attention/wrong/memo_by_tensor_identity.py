# expect: wrong_answer
# mistake: a correct tiled kernel whose results are memoised by the input tensor objects (their id(), the objects
# kept alive so an id is never reused): a caller who writes new values into the same Q, K, V buffers gets the old output
import math

import torch

_memo = {}


def _flash(Q, K, V, block_size):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    m = torch.full((B, S, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros(B, S, V.shape[-1], dtype=Q.dtype, device=Q.device)
    for ks in range(0, S, block_size):
        s = (Q * scale) @ K[:, ks:ks + block_size].transpose(1, 2)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ V[:, ks:ks + block_size]
        m = m_new
    return acc / l


def flash_attention(Q, K, V, block_size=32):
    key = (id(Q), id(K), id(V), block_size)
    hit = _memo.get(key)
    if hit is not None and hit[0] is Q and hit[1] is K and hit[2] is V:
        return hit[3]
    out = _flash(Q, K, V, block_size)
    _memo[key] = (Q, K, V, out)
    return out
