# expect: forbidden_call
# problem: flash_attention
# Naive attention, the full S x S score matrix, computed in numpy (an import the contract allows), where
# the grader's guards measure nothing, inside a custom autograd Function whose backward is the naive
# gradient in torch. Accepted before: no largest intermediate, no reduction was seen. Where a case
# measures memory or work, tensor data may not leave torch (Tensor.numpy is refused).
import math

import numpy as np
import torch


class _Naive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        q, k, v = (t.detach().double().numpy() for t in (Q, K, V))
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
