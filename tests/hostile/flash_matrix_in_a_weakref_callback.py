# expect: too_much_memory
# problem: flash_attention
# Hostile: computes the full S x S score matrix in a weakref callback. The object it watches is held only by a
# tensor's storage (torch.frombuffer); Tensor.set_ frees that storage inside the aten kernel, inside the dispatch
# guard's own handler (both guard modes off the stack), where the callback would run unmeasured.
import math
import weakref

import torch

_job, _refs = [], []


class _Buffer(bytearray):
    pass


def _compute(_ref):
    Q, K, V, out = _job.pop()
    s = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    out.copy_(torch.matmul(torch.softmax(s, dim=-1), V))


def _full(Q, K, V):
    with torch.no_grad():
        out = torch.empty_like(Q)
        _job.append((Q, K, V, out))
        buf = _Buffer(8)
        _refs.append(weakref.ref(buf, _compute))
        t = torch.frombuffer(buf, dtype=torch.float32)
        del buf
        t.set_(torch.empty(0, dtype=torch.float32))  # the buffer dies inside the kernel
    return out


class _Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
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
