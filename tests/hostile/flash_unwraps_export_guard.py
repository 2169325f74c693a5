# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# The worker wraps torch._C._to_dlpack so that, where a case measures memory and work, calling it is a
# forbidden call. The wrapper keeps the real function as a keyword default: __kwdefaults__ hands it back,
# and the data leaves torch through it unseen. Naive S x S attention in numpy, a torch backward.
import math

import numpy as np
import torch

_to_dlpack = (torch._C._to_dlpack.__kwdefaults__ or {}).get("__fn", torch._C._to_dlpack)


class _Capsule:
    def __init__(self, t):
        self.cap = _to_dlpack(t.detach().contiguous())

    def __dlpack__(self, **kwargs):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


class _Naive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        q, k, v = (np.from_dlpack(_Capsule(t)).astype(np.float64) for t in (Q, K, V))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return torch.from_numpy(p @ v).to(Q.dtype)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
            return torch.autograd.grad(o, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Naive.apply(Q, K, V)
