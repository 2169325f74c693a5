# expect: wrong_answer
# mistake: rescales l and acc in place through .data ("saves memory"): the forward is exact, but autograd
# never sees the rescale, so every gradient is wrong
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    out = []
    for i in range(0, S, block_size):
        q = Q[:, i:i + block_size] / math.sqrt(D)
        n = q.shape[1]
        m = torch.full((B, n, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros(B, n, 1, dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(B, n, V.shape[-1], dtype=Q.dtype, device=Q.device)
        for j in range(0, S, block_size):
            s = q @ K[:, j:j + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l.data.mul_(alpha.data)
            acc.data.mul_(alpha.data)
            l = l + p.sum(-1, keepdim=True)
            acc = acc + p @ V[:, j:j + block_size]
            m = m_new
        out.append(acc / l)
    return torch.cat(out, dim=1)
