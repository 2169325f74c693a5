# expect: forbidden_call
# problem: flash_attention
# (Refused now before it runs: it names __code__, which the scan refuses, and it builds its code by hand, which
# reflection.py refuses. Before those, the hook's own defence, below, left it computing nothing: a wrong answer.)
# Hostile: the full S x S score matrix built in the __str__ of a storage deleter's globals' __name__: the grader's
# profile hook once read that name (str()) inside itself, with the guard modes popped. The hook looks at exact
# built-in types only now: nothing is computed, and the zeros it returns otherwise are wrong.
import math
import types
import torch

_job = []


class _Name:
    def __str__(self):
        if _job:
            Q, K, V, out = _job.pop()
            S = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1)  # B x S x S, unmeasured
            out.copy_(S @ V)
        return "learner"


def _del_body(self):
    pass


_del = types.FunctionType(_del_body.__code__, {"__name__": _Name(), "__builtins__": __builtins__}, "__del__")


class _Trigger(bytearray):
    __del__ = _del


def _run(Q, K, V):
    out = torch.empty_like(Q[..., :1].expand(*Q.shape[:-1], V.shape[-1])).contiguous()
    _job.append((Q, K, V, out))
    torch.frombuffer(_Trigger(8), dtype=torch.float32).set_(torch.empty(0))
    return out


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, block_size):
        ctx.save_for_backward(Q, K, V)
        ctx.block = block_size
        return _run(Q, K, V)

    @staticmethod
    def backward(ctx, g):  # honest tiled recomputation
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = _tiled(q, k, v, ctx.block)
            return (*torch.autograd.grad(out, (q, k, v), g), None)


def _tiled(Q, K, V, bs):
    B, S, D = Q.shape
    scale = 1 / math.sqrt(D)
    outs = []
    for i in range(0, S, bs):
        q = Q[:, i:i + bs]
        m = torch.full(q.shape[:-1] + (1,), -float("inf"), dtype=Q.dtype)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[:-1] + (V.shape[-1],), dtype=Q.dtype)
        for j in range(0, S, bs):
            s = q @ K[:, j:j + bs].transpose(1, 2) * scale
            m2 = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m2)
            c = torch.exp(m - m2)
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + p @ V[:, j:j + bs]
            m = m2
        outs.append(acc / l)
    return torch.cat(outs, 1)


def flash_attention(Q, K, V, block_size=32):
    return _Flash.apply(Q, K, V, block_size)
