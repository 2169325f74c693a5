# expect: bad_interface
# problem: flash_attention
# The entry is rebound to a function with block_size=16 whose V has a default of a class with a metaclass
# whose __eq__ raises: a reader that asks `float in type(v).__mro__` runs that __eq__, fails, and (giving up
# on any error) reports no defaults at all.
import math

import torch


class _Meta(type):
    def __eq__(cls, other):
        raise RuntimeError("no")

    __hash__ = type.__hash__


class _Poison(metaclass=_Meta):
    pass


def _flash(Q, K, V=_Poison(), block_size=16):
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


flash_attention = _flash
