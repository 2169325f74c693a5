# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Calls Tensor.backward() during the call: torch function modes hand Tensor.backward to the grader's call
# guard, which runs it with itself off the stack, so the backward of a custom autograd Function of the
# learner's runs unwatched: there the inputs leave torch (numpy) for naive S x S attention, and the call
# returns what the backward computed. A second custom Function gives the naive gradient in torch.
import math

import numpy as np
import torch

_done = []


class _Smuggle(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, Q, K, V):
        ctx.qkv = (Q, K, V)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        q, k, v = (t.numpy().astype(np.float64) for t in ctx.qkv)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        p = np.exp(s - s.max(-1, keepdims=True))
        _done.append(torch.from_numpy(p / p.sum(-1, keepdims=True) @ v))
        return g, None, None, None


class _Naive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        with torch.enable_grad():
            x = torch.zeros(1, requires_grad=True)
            _Smuggle.apply(x, *(t.detach() for t in (Q, K, V))).sum().backward()
        return _done.pop().to(Q.dtype)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
            return torch.autograd.grad(o, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Naive.apply(Q, K, V)
