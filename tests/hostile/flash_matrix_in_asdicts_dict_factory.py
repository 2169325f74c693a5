# expect: too_much_memory
# problem: flash_attention
# Hostile: the full S x S score matrix built in the dict_factory dataclasses.asdict calls, from a weakref.finalize
# callback run inside the dispatch guard's handler (a torch.frombuffer storage freed by Tensor.set_): a function the
# dataclasses module calls passed for code it generates. It runs watched now.
import dataclasses
import math
import weakref

import torch

_job = []


class _Buffer(bytearray):
    pass


@dataclasses.dataclass
class _D:
    a: int = 1


def _factory(items):
    Q, K, V, out = _job.pop()
    s = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    out.copy_(torch.matmul(torch.softmax(s, dim=-1), V))
    return {}


def _full(Q, K, V):
    out = torch.empty_like(Q)
    _job.append((Q, K, V, out))
    buf = _Buffer(8)
    weakref.finalize(buf, dataclasses.asdict, _D(), dict_factory=_factory)
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
