# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Reads the inputs one element at a time (float(x): no numpy, no tolist) and computes naive attention,
# the full S x S table, in plain Python, inside a custom autograd Function whose backward is the naive
# gradient in torch. The guards see a few thousand scalar reads and nothing of the S x S table; where
# a case measures memory or work, more than a few hundred scalars may not leave torch in one call.
import math

import torch


def _rows(t):
    return [[[float(x) for x in row] for row in mat] for mat in t.detach()]


class _Naive(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        q, k, v = _rows(Q), _rows(K), _rows(V)
        scale = 1 / math.sqrt(len(q[0][0]))
        out = []
        for qb, kb, vb in zip(q, k, v):
            rows = []
            for qi in qb:
                s = [scale * sum(a * b for a, b in zip(qi, kj)) for kj in kb]  # a full row of scores
                top = max(s)
                p = [math.exp(x - top) for x in s]
                z = sum(p)
                rows.append([sum(pj * vj[d] for pj, vj in zip(p, vb)) / z for d in range(len(vb[0]))])
            out.append(rows)
        return torch.tensor(out, dtype=Q.dtype, device=Q.device)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
            return torch.autograd.grad(o, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Naive.apply(Q, K, V)
