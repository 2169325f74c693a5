# expect: forbidden_call
# problem: flash_attention
# args: --time-limit 5
# Naive attention on sparse tensors: half the queries at a time, every (query, key) score is stored in a
# sparse matrix whose pattern is full (sampled_addmm), softmax-ed over all S keys at once by
# torch.sparse.softmax and multiplied by V with torch.sparse.mm. The guards measured strided tensors and
# known ops only: no tensor seemed to hold S x S values, no op seemed to reduce over every key.
# A custom autograd Function gives the naive gradient in torch.
import math

import torch


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


def _rows(q, k, v):
    n, S = q.shape[0], k.shape[0]
    pattern = torch.sparse_csr_tensor(torch.arange(0, n * S + 1, S), torch.arange(S).repeat(n),
                                      torch.zeros(n * S, dtype=q.dtype), (n, S))
    s = torch.sparse.sampled_addmm(pattern, q, k.t(), beta=0.0, alpha=1 / math.sqrt(q.shape[-1]))
    return torch.sparse.mm(torch.sparse.softmax(s.to_sparse_coo(), 1), v)


class _Sparse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        out = []
        for q, k, v in zip(Q, K, V):
            h = max(q.shape[0] // 2, 1)
            out.append(torch.cat([_rows(q[i:i + h], k, v) for i in range(0, q.shape[0], h)]))
        return torch.stack(out)

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Sparse.apply(Q, K, V)
