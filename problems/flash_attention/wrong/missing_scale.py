# expect: wrong_answer
# mistake: forgets the 1/sqrt(D) scale
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs : qs + block_size]
        m = torch.full((B, q.shape[1], 1), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros(B, q.shape[1], 1, dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(B, q.shape[1], D, dtype=Q.dtype, device=Q.device)
        for ks in range(0, S, block_size):
            s = q @ K[:, ks : ks + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ V[:, ks : ks + block_size]
            m = m_new
        outs.append(acc / l)
    return torch.cat(outs, 1)
