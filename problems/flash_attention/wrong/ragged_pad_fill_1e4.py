# expect: wrong_answer
# mistake: K and V are zero-padded up to a multiple of block_size (so every tile has one shape) and the padded keys
#   are hidden with a score of -1e4 instead of -inf: when every real score of a row is below -1e4 the padded keys
#   (score -1e4) win and the row comes out as zeros. Only rows of a ragged last block with very negative scores see it
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    bs = min(block_size, S)
    n = -(-S // bs)
    pad = n * bs - S
    Kp = torch.cat([K, K.new_zeros(B, pad, D)], dim=1)
    Vp = torch.cat([V, V.new_zeros(B, pad, V.size(-1))], dim=1)
    valid = torch.arange(n * bs, device=Q.device) < S
    scale = 1.0 / math.sqrt(D)
    outs = []
    for qs in range(0, S, bs):
        q = Q[:, qs:qs + bs].float()
        m = torch.full(q.shape[:-1] + (1,), float("-inf"), device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[0], q.shape[1], V.size(-1), device=Q.device)
        for ks in range(0, n * bs, bs):
            s = q @ Kp[:, ks:ks + bs].float().transpose(-2, -1) * scale
            s = s + (~valid[ks:ks + bs]).float() * -1e4  # hide the padding
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            c = torch.exp(m - m_new)
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + p @ Vp[:, ks:ks + bs].float()
            m = m_new
        outs.append((acc / l).to(Q.dtype))
    return torch.cat(outs, dim=1)
