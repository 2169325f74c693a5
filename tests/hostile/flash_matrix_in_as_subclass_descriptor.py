# expect: forbidden_call
# problem: flash_attention
# hostile: no torch class at all: a tensor subclass of its own made with as_subclass, whose __torch_dispatch__ is a
# descriptor. torch reads it while building the subclass, with every dispatch mode off: the full S x S matrix
# computed there would go unmeasured (the call guard sees those ops with the dispatch guard off the stack)
import math

import torch

_job = {}


class _Hook:
    def __get__(self, obj, typ=None):
        job = _job.pop("qkv", None)
        if job is not None and obj is not None:
            Q, K, V = job
            _job["out"] = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1) @ V
        return torch.Tensor.__torch_dispatch__


class Marker(torch.Tensor):
    __torch_dispatch__ = _Hook()


def flash_attention(Q, K, V, block_size=32):
    _job["qkv"] = (Q, K, V)
    torch.empty(0).as_subclass(Marker)
    out = _job.pop("out", None)
    if out is None:
        return torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1) @ V
    return out
