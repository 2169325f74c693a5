"""Reference: exact attention, tile by tile, with an online softmax."""

import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    stats = torch.promote_types(Q.dtype, torch.float32)  # running statistics in float32 (float64 stays float64)
    out_blocks = []
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size] * scale  # (B, bq, D)
        bq = q.shape[1]
        m = torch.full((B, bq, 1), float("-inf"), dtype=stats, device=Q.device)  # running max
        l = torch.zeros(B, bq, 1, dtype=stats, device=Q.device)  # running sum of exp
        acc = torch.zeros(B, bq, V.shape[-1], dtype=stats, device=Q.device)  # running sum of exp @ V
        for ks in range(0, S, block_size):
            k = K[:, ks:ks + block_size]  # (B, bk, D)
            v = V[:, ks:ks + block_size]  # (B, bk, D)
            s = (q @ k.transpose(1, 2)).to(stats)  # (B, bq, bk): one tile of scores
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)  # (B, bq, bk)
            alpha = torch.exp(m - m_new)  # rescale what was accumulated under the old max
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            acc = alpha * acc + p @ v.to(stats)  # (B, bq, D)
            m = m_new
        out_blocks.append((acc / l).to(Q.dtype))
    return torch.cat(out_blocks, dim=1)  # (B, S, D)
