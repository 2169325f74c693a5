# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Registers a Python kernel of its own for a torch operator the problem never needs (aten::logaddexp on
# the CPU) and computes naive attention (the full S x S scores, a softmax over every key at once) in it.
# The grader's dispatch mode saw one logaddexp and then ran the kernel with the mode off the stack.
# A custom autograd Function gives the naive gradient in torch.
import math

import torch

_lib = torch.library.Library("aten", "IMPL")


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


def _kernel(packed, V):
    D = V.shape[-1]
    Q, K = packed[..., :D], packed[..., D:]
    return _naive(Q, K, V)


_lib.impl("logaddexp", _kernel, "CPU")


class _Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        return torch.logaddexp(torch.cat([Q, K], -1), V)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Hidden.apply(Q, K, V)
