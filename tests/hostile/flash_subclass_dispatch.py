# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Naive attention (the full S x S score matrix, a softmax over every key at once) computed inside the
# __torch_dispatch__ of a tensor subclass: while a torch dispatch mode handles an op, the mode is off the
# stack, so the ops a subclass runs on its unwrapped tensors went unseen (no largest intermediate, no
# widest reduction). A custom autograd Function gives the naive gradient in torch.
import math

import torch


class _Box(torch.Tensor):
    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        q, k, v = (a.inner if isinstance(a, _Box) else a for a in args)
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(s, -1) @ v


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


class _Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        return torch.ops.aten.addcmul(_Box(Q), K, V)  # any op: the box computes attention instead

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Hidden.apply(Q, K, V)
