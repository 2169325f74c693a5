# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Takes the inputs out of torch as printed text (repr with every element and ten digits: no numpy, no
# tolist, no item()), parses it, and computes naive attention (the full S x S table) in plain Python inside
# a custom autograd Function whose backward is the naive gradient in torch. Tensor.__repr__ runs its own
# formatting with the guard's torch function mode off the stack: nothing counted the elements it read.
import math
import re

import torch


def _rows(t):
    torch.set_printoptions(precision=10, threshold=1 << 30, sci_mode=True, linewidth=1 << 30)
    flat = [float(x) for x in re.findall(r"-?\d\.\d+e[+-]\d+", repr(t.detach().contiguous().reshape(-1)))]
    B, S, D = t.shape
    return [[flat[(b * S + i) * D:(b * S + i + 1) * D] for i in range(S)] for b in range(B)]


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
