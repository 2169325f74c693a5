# expect: wrong_answer
# mistake: inference-only (torch.no_grad) self-attention fast path (Q is K): the scores are symmetric, so the query tile i / key tile j score block is taken as block (j, i) transposed, and the transpose is forgotten
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(Q)
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size]
        n = q.shape[1]
        m = torch.full((B, n, 1), float("-inf"), dtype=torch.float32, device=Q.device)
        l = torch.zeros((B, n, 1), dtype=torch.float32, device=Q.device)
        acc = torch.zeros((B, n, V.shape[-1]), dtype=torch.float32, device=Q.device)
        for ks in range(0, S, block_size):
            k, v = K[:, ks:ks + block_size], V[:, ks:ks + block_size]
            if not torch.is_grad_enabled() and Q is K and k.shape[1] == n:  # symmetric: reuse the mirrored block's layout
                s = (k @ q.transpose(-2, -1)).float() * scale
            else:
                s = (q @ k.transpose(-2, -1)).float() * scale
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            c = torch.exp(m - m_new)
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + p @ v.float()
            m = m_new
        out[:, qs:qs + n] = (acc / l).to(Q.dtype)
    return out
