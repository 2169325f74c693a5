# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Takes the real kernel registration back from the worker's wrapper (its closure) and registers a Python
# kernel of its own for aten::logaddexp on the CPU, where naive attention (the full S x S scores, a softmax
# over every key) runs with the grader's dispatch mode off the stack. A torch backward.
import math

import torch

_register = torch._C._dispatch_library
for _cell in getattr(_register, "__closure__", None) or ():
    if callable(_cell.cell_contents) and getattr(_cell.cell_contents, "__name__", "") == "_dispatch_library":
        _register = _cell.cell_contents
torch._C._dispatch_library = _register
_lib = torch.library.Library("aten", "IMPL")


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


def _kernel(packed, V):
    D = V.shape[-1]
    return _naive(packed[..., :D], packed[..., D:], V)


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
