# expect: accepted
# alternative: FlashAttention-2's algorithm as a torch.autograd.Function: the forward keeps only the output and each
# row's log-sum-exp; the backward recomputes every tile's probabilities from them (dV = P^T dO, dS = P (dP - D)).
# As in FlashAttention-2, the running statistics and the per-row ones (log-sum-exp, D = rowsum(dO * O)) are kept in float32: one number
# shared by a whole row, rounded to bfloat16, skews that row's gradient one way (the lean rule sees it)
import math

import torch


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, block_size):
        B, S, D = Q.shape
        scale = 1.0 / math.sqrt(D)
        out = torch.empty(B, S, V.shape[-1], dtype=Q.dtype, device=Q.device)
        lse = torch.empty(B, S, 1, dtype=torch.float32, device=Q.device)  # each row's log-sum-exp, in float32
        for qs in range(0, S, block_size):
            q = Q[:, qs:qs + block_size] * scale
            m = torch.full((B, q.shape[1], 1), float("-inf"), dtype=torch.float32, device=Q.device)
            l = torch.zeros(B, q.shape[1], 1, dtype=torch.float32, device=Q.device)
            acc = torch.zeros(B, q.shape[1], V.shape[-1], dtype=torch.float32, device=Q.device)
            for ks in range(0, S, block_size):
                s = (q @ K[:, ks:ks + block_size].transpose(1, 2)).float()
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
                l = alpha * l + p.sum(-1, keepdim=True)
                acc = alpha * acc + p @ V[:, ks:ks + block_size].float()
                m = m_new
            out[:, qs:qs + block_size] = (acc / l).to(Q.dtype)
            lse[:, qs:qs + block_size] = m + torch.log(l)
        ctx.save_for_backward(Q, K, V, out, lse)
        ctx.block_size, ctx.scale = block_size, scale
        return out

    @staticmethod
    def backward(ctx, dO):
        Q, K, V, O, lse = ctx.saved_tensors
        bs, scale = ctx.block_size, ctx.scale
        S = Q.shape[1]
        dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
        Dsum = (dO.float() * O.float()).sum(-1, keepdim=True)  # (B, S, 1): rowsum(dO * O), in float32
        for ks in range(0, S, bs):
            k, v = K[:, ks:ks + bs], V[:, ks:ks + bs]
            for qs in range(0, S, bs):
                q, do = Q[:, qs:qs + bs], dO[:, qs:qs + bs]
                p = torch.exp((q @ k.transpose(1, 2)).float() * scale - lse[:, qs:qs + bs])  # this tile's probabilities
                ds = (p * ((do @ v.transpose(1, 2)).float() - Dsum[:, qs:qs + bs])).to(q.dtype)
                dV[:, ks:ks + bs] += p.to(q.dtype).transpose(1, 2) @ do
                dQ[:, qs:qs + bs] += ds @ k * scale
                dK[:, ks:ks + bs] += ds.transpose(1, 2) @ q * scale
        return dQ, dK, dV, None


def flash_attention(Q, K, V, block_size=32):
    return _Flash.apply(Q, K, V, block_size)
