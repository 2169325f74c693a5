# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# A tensor subclass whose __torch_function__ (not __torch_dispatch__) computes naive attention in numpy
# (the full S x S scores): torch function modes hand a call to a subclass's __torch_function__ with the
# mode off the stack, so its Tensor.numpy() was no forbidden export, and numpy's work no op the guards
# measure. The result comes back as a plain tensor; a custom autograd Function gives a torch backward.
import math

import numpy as np
import torch


class _Side(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        q, k, v = (np.asarray(a.as_subclass(torch.Tensor).numpy(), dtype=np.float64) for a in args[0])
        s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        p = np.exp(s - s.max(-1, keepdims=True))
        return torch.from_numpy(p / p.sum(-1, keepdims=True) @ v)


class _Naive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        parts = [t.detach().as_subclass(_Side) for t in (Q, K, V)]
        return torch.stack(parts).to(Q.dtype)  # _Side.__torch_function__ answers instead

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
            return torch.autograd.grad(o, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Naive.apply(Q, K, V)
