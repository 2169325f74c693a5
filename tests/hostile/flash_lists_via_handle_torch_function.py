# expect: forbidden_call
# problem: flash_attention
# hostile: no tensor subclass: a plain function routed through torch.overrides.handle_torch_function. The grader's
# torch function mode receives it as `func` and calls it with the mode off the stack, so inside it Tensor.tolist()
# is no forbidden export and naive attention (every score of a row held at once) runs in Python lists, unmeasured.
# A custom autograd Function gives the gradient in torch.
import math

import torch
from torch.overrides import handle_torch_function


def _forward(Q, K, V):
    q, k, v = Q.detach().tolist(), K.detach().tolist(), V.detach().tolist()
    c = 1.0 / math.sqrt(len(q[0][0]))
    out = []
    for qb, kb, vb in zip(q, k, v):
        rows = []
        for qi in qb:
            s = [c * sum(a * b for a, b in zip(qi, kj)) for kj in kb]
            m = max(s)
            p = [math.exp(x - m) for x in s]
            z = sum(p)
            rows.append([sum(pj * vj[d] for pj, vj in zip(p, vb)) / z for d in range(len(vb[0]))])
        out.append(rows)
    return torch.tensor(out, dtype=Q.dtype)


class _Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        return handle_torch_function(_forward, (Q, K, V), Q, K, V)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            o = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), -1) @ v
            return torch.autograd.grad(o, (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Attn.apply(Q, K, V)
