# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Naive attention (the full S x S scores, a softmax over every key at once) computed in a profile hook
# (sys.setprofile): the hook runs at every Python call, the grader's own guard handlers included, which
# run with the guard modes off the stack. It waits for such a call (no dispatch mode on the stack),
# computes there unseen, and the call returns that. A custom autograd Function gives a torch backward.
import math
import sys

import torch

_job, _done = [], []


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


def _hook(*_):
    if _job and torch._C._len_torch_dispatch_stack() == 0:
        sys.setprofile(None)
        _done.append(_naive(*_job.pop()))


class _Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        _job.append(tuple(t.detach() for t in (Q, K, V)))
        sys.setprofile(_hook)
        Q.detach() + 0  # one op: the guard's handler calls Python functions of its own
        sys.setprofile(None)
        return _done.pop()

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Hidden.apply(Q, K, V)
