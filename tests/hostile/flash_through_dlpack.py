# expect: forbidden_call
# problem: flash_attention
# Like flash_in_numpy, but the data leaves torch through torch._C._to_dlpack, a plain C function that
# torch function modes never see (numpy wraps the capsule without copying), then naive S x S attention
# in numpy, with a torch backward. The worker wraps such functions (dlpack, _pickle_save): a forbidden
# call where the case measures memory or work.
import math

import numpy as np
import torch


class _Capsule:
    def __init__(self, t):
        self.cap = torch._C._to_dlpack(t.detach().contiguous())

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
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
            return torch.autograd.grad(o, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Naive.apply(Q, K, V)
