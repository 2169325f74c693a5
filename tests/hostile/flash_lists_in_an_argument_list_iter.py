# expect: wrong_answer
# problem: flash_attention
# Hostile: attention in Python lists (Tensor.tolist, refused where a case measures) run in the __iter__ of a list
# subclass handed to torch.cat: the grader's call guard walked the arguments inside its own handler. It walks the
# built-in containers' contents now, never a subclass's __iter__: nothing is computed, and the zeros are wrong.
import math
import torch

_job = []
_HITS = []


class _Args(list):
    def __iter__(self):
        if _job:
            Q, K, V, res = _job.pop()
            q, k, v = Q.tolist(), K.tolist(), V.tolist()
            sc = 1 / math.sqrt(len(q[0][0]))
            out = []
            for b in range(len(q)):
                rows = []
                for qi in q[b]:
                    s = [sc * sum(a * c for a, c in zip(qi, kj)) for kj in k[b]]
                    m = max(s)
                    e = [math.exp(x - m) for x in s]
                    z = sum(e)
                    rows.append([sum(e[j] * v[b][j][d] for j in range(len(e))) / z for d in range(len(v[b][0]))])
                out.append(rows)
            res.append(out)
        return super().__iter__()


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


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, block_size):
        ctx.save_for_backward(Q, K, V)
        ctx.block = block_size
        res = []
        _job.append((Q, K, V, res))
        torch.cat(_Args([Q[:0]]))
        _job.clear()
        if not res:  # an unmeasured case (no argument walk there): honest; every measured case took the lists path
            return torch.zeros_like(Q)
        _HITS.append(1)
        return torch.tensor(res[0], dtype=Q.dtype, device=Q.device)

    @staticmethod
    def backward(ctx, g):  # honest tiled recomputation
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = _tiled(q, k, v, ctx.block)
            return (*torch.autograd.grad(out, (q, k, v), g), None)


def flash_attention(Q, K, V, block_size=32):
    return _Flash.apply(Q, K, V, block_size)
