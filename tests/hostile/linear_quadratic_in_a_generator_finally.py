# expect: too_much_memory
# problem: linear_attention
# Hostile: builds the S x S matrix phi(Q) phi(K)^T in a generator's finally block. The suspended generator is held
# only by an object behind a tensor's storage (torch.frombuffer); Tensor.set_ frees it inside the aten kernel, so
# the generator is closed, and its finally block runs, inside the dispatch guard's own handler, unmeasured.
import torch
import torch.nn.functional as F

_job = []


def _later():
    try:
        yield
    finally:
        if _job:
            Q, K, V, eps, out = _job.pop()
            q, k = F.elu(Q) + 1, F.elu(K) + 1
            w = q @ k.transpose(-2, -1)
            out.copy_((w @ V) / (w.sum(-1, keepdim=True) + eps))


class _Buffer(bytearray):
    pass


def _run(Q, K, V, eps):
    out = torch.empty(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
    _job.append((Q, K, V, eps, out))
    buf = _Buffer(8)
    g = _later()
    next(g)
    buf.gen = g
    del g
    t = torch.frombuffer(buf, dtype=torch.float32)
    del buf
    t.set_(torch.empty(0, dtype=torch.float32))
    return out


class _Lin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, eps):
        ctx.save_for_backward(Q, K, V)
        ctx.eps = eps
        return _run(Q, K, V, eps)

    @staticmethod
    def backward(ctx, g):  # honest, and not measured
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            fq, fk = F.elu(q) + 1, F.elu(k) + 1
            out = (fq @ (fk.transpose(-2, -1) @ v)) / (fq @ fk.sum(1, keepdim=True).transpose(-2, -1) + ctx.eps)
            return (*torch.autograd.grad(out, (q, k, v), g), None)


def linear_attention(Q, K, V, eps=1e-6):
    return _Lin.apply(Q, K, V, eps)
