# expect: forbidden_call
# problem: linear_attention
# hostile: the quadratic (B x S x S) form of linear attention, computed inside a __torch_dispatch__ descriptor of a
# CausalBias subclass, which torch's C constructor reads with every dispatch mode off:
# the memory and work measures never see it
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import CausalBias, CausalVariant

_job = {}
_DEFAULT = torch.Tensor.__torch_dispatch__


class _Hook:
    def __get__(self, obj, typ=None):
        job = _job.pop("qkv", None)
        if job is not None and obj is not None:
            Q, K, V, eps = job
            q, k = F.elu(Q) + 1, F.elu(K) + 1
            a = q @ k.transpose(1, 2)
            _job["out"] = (a @ V) / (a.sum(-1, keepdim=True) + eps)
        return _DEFAULT


class Sneaky(CausalBias):
    __torch_dispatch__ = _Hook()


def linear_attention(Q, K, V, eps=1e-6):
    _job["qkv"] = (Q, K, V, eps)
    Sneaky(CausalVariant.UPPER_LEFT, 1, 1)
    _job.pop("qkv", None)
    return _job.pop("out")
