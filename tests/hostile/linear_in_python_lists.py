# expect: forbidden_call
# problem: linear_attention
# args: --time-limit 5
# The quadratic form of linear attention (every phi(q_i) . phi(k_j): an S x S table) computed on Python
# lists from .tolist(), where neither the largest intermediate nor the growth of the work is seen, inside
# a custom autograd Function whose backward is the same quadratic form in torch (backward is not
# measured). Accepted before; where a case measures memory or work, tensor data may not leave torch.
import torch
import torch.nn.functional as F


def _quadratic(Q, K, V, eps):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    w = q @ k.transpose(-2, -1)
    return (w @ V) / (w.sum(-1, keepdim=True) + eps)


class _InLists(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, eps):
        ctx.save_for_backward(Q, K, V)
        ctx.eps = eps
        q, k, v = (F.elu(Q) + 1).tolist(), (F.elu(K) + 1).tolist(), V.tolist()
        out = []
        for qb, kb, vb in zip(q, k, v):
            rows = []
            for qi in qb:
                w = [sum(a * b for a, b in zip(qi, kj)) for kj in kb]  # one row of the S x S table
                z = sum(w) + eps
                rows.append([sum(wj * vj[d] for wj, vj in zip(w, vb)) / z for d in range(len(vb[0]))])
            out.append(rows)
        return torch.tensor(out, dtype=Q.dtype, device=Q.device)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            return (*torch.autograd.grad(_quadratic(q, k, v, ctx.eps), (q, k, v), g), None)


def linear_attention(Q, K, V, eps=1e-6):
    return _InLists.apply(Q, K, V, eps)
