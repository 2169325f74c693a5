# expect: runtime_error
# problem: flash_attention
# hostile: the full S x S softmax, computed in a finalizer the cyclic garbage collector runs while torch has the
# grader's dispatch guard off the stack (inside its handler), so neither memory nor work would be measured. The
# guard keeps the collector off during the call: the finalizer never runs there, and nothing is returned (IndexError)
import math
import torch

_box = []
_args = []


class Bomb:
    def __init__(self):
        self.me = self  # a cycle: only the cyclic collector frees it

    def __del__(self):
        if _box or not _args:
            return
        if torch._C._len_torch_dispatch_stack() != 0:
            return  # in the learner's own code, where the guard would see it
        Q, K, V = _args
        s = Q.float() @ K.float().transpose(1, 2) / math.sqrt(Q.shape[-1])
        _box.append((torch.softmax(s, -1) @ V.float()).to(V.dtype))


def _plain(Q, K, V):
    s = Q.float() @ K.float().transpose(1, 2) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -1) @ V.float()).to(V.dtype)


class Full(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        _box.clear()
        _args[:] = [Q.detach(), K.detach(), V.detach()]
        x = Q[:1, :1, :1].detach()
        for _ in range(5000):
            if _box:
                break
            Bomb()
            x = x + 0.0
        _args.clear()
        return _box.pop()

    @staticmethod
    def backward(ctx, g):  # not measured
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = _plain(q, k, v)
            return torch.autograd.grad(out, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return Full.apply(Q, K, V)
