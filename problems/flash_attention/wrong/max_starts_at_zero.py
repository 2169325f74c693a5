# expect: wrong_answer
# mistake: the running max starts at 0 instead of -inf: exact until every score of a row is very negative, then exp underflows to 0/0
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros_like(V)
    for ks in range(0, S, block_size):
        s = Q @ K[:, ks : ks + block_size].transpose(1, 2) / math.sqrt(D)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ V[:, ks : ks + block_size]
        m = m_new
    return acc / l
