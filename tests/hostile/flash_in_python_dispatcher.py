# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Turns on torch's Python dispatcher and gives aten::logaddexp a Python kernel for the CPU (py_impl), where
# naive attention (the full S x S scores, a softmax over every key at once) runs with the grader's dispatch
# mode off the stack. A custom autograd Function gives the naive gradient in torch.
import math

import torch
from torch._C import DispatchKey
from torch._dispatch.python import enable_python_dispatcher


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


@torch.ops.aten.logaddexp.default.py_impl(DispatchKey.CPU)
def _kernel(packed, V):
    D = V.shape[-1]
    return _naive(packed[..., :D], packed[..., D:], V)


class _Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        with enable_python_dispatcher():
            return torch.logaddexp(torch.cat([Q, K], -1), V)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Hidden.apply(Q, K, V)
