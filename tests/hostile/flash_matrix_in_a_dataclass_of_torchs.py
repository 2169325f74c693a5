# expect: too_much_memory
# problem: flash_attention
# Hostile: a dataclass made in torch's name (make_dataclass with __module__ "torch": its generated __init__ runs in torch's
# namespace) is a weakref callback; its fields' default factories are torch's own C functions (out=), so no Python
# of the learner's runs when the watched object dies inside the dispatch guard's handler (Tensor.set_ frees a
# torch.frombuffer storage there). The S x S score matrix is built there, unmeasured.
import dataclasses
import functools
import math
import weakref

import torch

_refs = []


class _Holder(bytearray):
    pass


def _full(Q, K, V):
    B, S, D = Q.shape
    scores = torch.empty(0, dtype=Q.dtype)
    top, total, out = torch.empty(B, S, 1, dtype=Q.dtype), torch.empty(B, S, 1, dtype=Q.dtype), torch.empty_like(V)
    steps = [functools.partial(scores.resize_, (B, S, S)),
             functools.partial(torch.matmul, Q, K.transpose(-2, -1), out=scores),
             functools.partial(scores.mul_, 1 / math.sqrt(D)),
             functools.partial(torch.amax, scores, -1, True, out=top), functools.partial(scores.sub_, top),
             functools.partial(scores.exp_), functools.partial(torch.sum, scores, -1, True, out=total),
             functools.partial(torch.matmul, scores, V, out=out)]
    fields = [("ref", object)] + [(f"s{i}", object, dataclasses.field(default_factory=f)) for i, f in enumerate(steps)]
    Steps = dataclasses.make_dataclass("Steps", fields, namespace={"__module__": "torch"})
    holder = _Holder(8)
    _refs.append(weakref.ref(holder, Steps))
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
    def backward(ctx, g):  # honest, and not measured
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v
            return torch.autograd.grad(out, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Attn.apply(Q, K, V)
