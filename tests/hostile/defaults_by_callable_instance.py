# expect: bad_interface
# problem: flash_attention
# The entry is an object whose class's __call__ takes block_size=16 (the same numbers: only the defaults
# check can tell): nothing a reader of defaults walks into, and no `def flash_attention` for the source check.
import math

import torch


class _Flash:
    def __call__(self, Q, K, V, block_size=16):
        return _flash(Q, K, V, block_size)


def _flash(Q, K, V, block_size=16):
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


flash_attention = _Flash()
