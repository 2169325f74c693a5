# expect: wrong_answer
# mistake: pads K and V with zero rows up to a multiple of block_size and then hides the padded keys by their score (exactly 0), so a real key (or query) of zeros is hidden too
import math

import torch
import torch.nn.functional as F


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    bs = min(block_size, S)
    pad = (-S) % bs
    Kp = F.pad(K, (0, 0, 0, pad))  # zero keys: their scores are exactly 0
    Vp = F.pad(V, (0, 0, 0, pad))
    scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(Q)
    for qs in range(0, S, bs):
        q = Q[:, qs:qs + bs]
        n = q.shape[1]
        m = torch.full((B, n, 1), float("-inf"), dtype=torch.float32, device=Q.device)
        l = torch.zeros((B, n, 1), dtype=torch.float32, device=Q.device)
        acc = torch.zeros((B, n, V.shape[-1]), dtype=torch.float32, device=Q.device)
        for ks in range(0, S + pad, bs):
            k, v = Kp[:, ks:ks + bs], Vp[:, ks:ks + bs]
            s = (q @ k.transpose(-2, -1)).float() * scale
            s = s.masked_fill(s == 0, float("-inf"))  # padded keys
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe)
            c = torch.exp(m - safe)
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + p @ v.float()
            m = m_new
        out[:, qs:qs + n] = (acc / l).to(Q.dtype)
    return out
