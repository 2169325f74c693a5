# expect: too_much_memory
# problem: flash_attention
# Hostile: each step of the full S x S softmax a functools.partial of torch's C functions (out=) that
# weakref.finalize calls inside the dispatch guard's handler: a partial fires no profile event of its own. The
# finalizer's whole call runs with the guards put back now.
import functools
import math
import weakref

import torch


class _Holder(bytearray):
    pass


def _full(Q, K, V):
    B, S, D = Q.shape
    scores = torch.empty(0, dtype=Q.dtype)
    top = torch.empty(B, S, 1, dtype=Q.dtype)
    total = torch.empty(B, S, 1, dtype=Q.dtype)
    out = torch.empty_like(V)
    Kt = K.transpose(-2, -1)
    holder = _Holder(8)
    parts = [object.__new__(type("P", (), {})) for _ in range(8)]
    holder.parts = parts
    steps = [functools.partial(scores.resize_, (B, S, S)), functools.partial(torch.matmul, Q, Kt, out=scores),
             functools.partial(scores.mul_, 1 / math.sqrt(D)), functools.partial(torch.amax, scores, -1, True, out=top),
             functools.partial(scores.sub_, top), functools.partial(scores.exp_),
             functools.partial(torch.sum, scores, -1, True, out=total), functools.partial(torch.matmul, scores, V, out=out)]
    for part, fn in zip(reversed(parts), steps):
        weakref.finalize(part, fn)
    del parts, part
    t = torch.frombuffer(holder, dtype=torch.float32)
    del holder
    t.set_(torch.empty(0, dtype=torch.float32))
    return out.div_(total)


class _Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        with torch.no_grad():
            return _full(Q, K, V)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
            return torch.autograd.grad(out, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Attn.apply(Q, K, V)
