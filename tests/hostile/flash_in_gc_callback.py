# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Naive attention (the full S x S scores, a softmax over every key at once) computed in a garbage-collector
# callback (gc.callbacks): collections run at allocations, most of them inside the grader's own guard
# handlers, which run with the guard modes off the stack. The callback waits for such a moment (no dispatch
# mode on the stack) and computes there unseen. A custom autograd Function gives a torch backward.
import gc
import math

import torch

_job, _done = [], []


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


def _cb(phase, info):
    if phase == "start" and _job and torch._C._len_torch_dispatch_stack() == 0:
        _done.append(_naive(*_job.pop()))


class _Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        _job.append(tuple(t.detach() for t in (Q, K, V)))
        old = gc.get_threshold()
        gc.callbacks.append(_cb)
        gc.set_threshold(1)
        x = Q.detach()
        while not _done:
            x = x + 0
        gc.set_threshold(*old)
        gc.callbacks.remove(_cb)
        return _done.pop()

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Hidden.apply(Q, K, V)
