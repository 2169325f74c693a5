# expect: too_much_memory
# problem: linear_attention
# Hostile: the quadratic form (phi(Q) phi(K)^T, a B x S x S matrix) computed in the __del__ of a bytearray
# subclass backing a torch.frombuffer tensor; Tensor.set_ frees that storage inside the aten kernel, inside the
# dispatch guard's own handler, so neither the memory nor the work measurement sees it.
import torch
import torch.nn.functional as F

_job = []


class _Trigger(bytearray):
    def __del__(self):
        if not _job:
            return
        Q, K, V, eps, out = _job.pop()
        fq, fk = F.elu(Q) + 1, F.elu(K) + 1
        A = fq @ fk.transpose(-2, -1)  # B x S x S
        out.copy_((A @ V) / (A.sum(-1, keepdim=True) + eps))


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
    def backward(ctx, g):  # not measured
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
