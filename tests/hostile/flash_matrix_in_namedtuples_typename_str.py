# expect: too_much_memory
# problem: flash_attention
# Hostile: the full S x S score matrix built in the __str__ of an object handed to collections.namedtuple as its type
# name, by a weakref.finalize callback that runs as Tensor.set_ frees a torch.frombuffer storage inside the dispatch
# guard's handler: the standard library's namedtuple calls it there, and code namedtuple calls once passed for what
# it generates. It runs watched now.
import collections
import math
import weakref

import torch

_job = []


class _Buffer(bytearray):
    pass


class _Name:
    def __str__(self):
        Q, K, V, out = _job.pop()
        s = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
        out.copy_(torch.matmul(torch.softmax(s, dim=-1), V))
        return "T"


def _full(Q, K, V):
    out = torch.empty_like(Q)
    _job.append((Q, K, V, out))
    buf = _Buffer(8)
    weakref.finalize(buf, collections.namedtuple, _Name(), "a")
    t = torch.frombuffer(buf, dtype=torch.float32)
    del buf
    t.set_(torch.empty(0, dtype=torch.float32))
    return out


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
