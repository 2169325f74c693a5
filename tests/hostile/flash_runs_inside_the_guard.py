# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# A tensor subclass (no __torch_dispatch__ of its own) whose untyped_storage() is Python of the learner's:
# the grader's dispatch mode calls untyped_storage() on every op's inputs to measure fresh memory, so that
# Python runs inside the guard's own handler, with both guard modes off the stack. There it computes naive
# attention (the full S x S scores, a softmax over every key) unseen; the call returns what it computed.
# A custom autograd Function gives the naive gradient in torch.
import math

import torch

_done = []


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


class _Spy(torch.Tensor):
    work = None

    def untyped_storage(self):
        if _Spy.work is not None:
            args, _Spy.work = _Spy.work, None
            _done.append(_naive(*args))
        return super().untyped_storage()


class _Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        _Spy.work = tuple(t.detach().as_subclass(torch.Tensor) for t in (Q, K, V))
        Q.detach().as_subclass(_Spy) + 0  # the guard looks at this input's storage
        return _done.pop().as_subclass(torch.Tensor)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Hidden.apply(Q, K, V)
