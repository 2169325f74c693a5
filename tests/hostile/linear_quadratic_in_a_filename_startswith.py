# expect: forbidden_call
# problem: linear_attention
# (Refused now before it runs: it names __code__, which the scan refuses, and it builds its code by hand, which
# reflection.py refuses. Before those, the hook's own defence, below, left it computing nothing: a wrong answer.)
# Hostile: a storage deleter's code with a str subclass as co_filename (code.replace keeps it) whose startswith()
# computes the B x S x S matrix phi(Q) phi(K)^T: the grader's profile hook called it inside itself. It trusts exact
# str file names only now: nothing is computed there.
import types
import torch
import torch.nn.functional as F

_job = []


class _Name(str):
    def startswith(self, *a):
        if _job:
            Q, K, V, eps, out = _job.pop()
            fq, fk = F.elu(Q) + 1, F.elu(K) + 1
            A = fq @ fk.transpose(-2, -1)  # B x S x S, unmeasured
            out.copy_((A @ V) / (A.sum(-1, keepdim=True) + eps))
        return False


def _del_body(self):
    pass


_del = types.FunctionType(_del_body.__code__.replace(co_filename=_Name(__file__)), globals(), "__del__")


class _Trigger(bytearray):
    __del__ = _del


def _run(Q, K, V, eps):
    out = torch.empty(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
    _job.append((Q, K, V, eps, out))
    torch.frombuffer(_Trigger(8), dtype=torch.float32).set_(torch.empty(0))
    return out


class _Lin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, eps):
        ctx.save_for_backward(Q, K, V)
        ctx.eps = eps
        return _run(Q, K, V, eps)

    @staticmethod
    def backward(ctx, g):  # honest linear backward
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            fq, fk = F.elu(q) + 1, F.elu(k) + 1
            kv = fk.transpose(-2, -1) @ v
            out = (fq @ kv) / (fq @ fk.sum(1, keepdim=True).transpose(-2, -1) + ctx.eps)
            gq, gk, gv = torch.autograd.grad(out, (q, k, v), g)
        return gq, gk, gv, None


def linear_attention(Q, K, V, eps=1e-6):
    return _Lin.apply(Q, K, V, eps)
