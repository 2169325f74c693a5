# expect: wrong_answer
# mistake: the full blocks use the online softmax, but the ragged tail is added afterwards without rescaling to a new max
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = torch.full((B, S, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros_like(V)
    full = S - S % block_size
    for ks in range(0, full, block_size):
        s = Q @ K[:, ks : ks + block_size].transpose(1, 2) / math.sqrt(D)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l, acc, m = alpha * l + p.sum(-1, keepdim=True), alpha * acc + p @ V[:, ks : ks + block_size], m_new
    if full < S:  # the ragged tail
        s = Q @ K[:, full:].transpose(1, 2) / math.sqrt(D)
        if full == 0:
            m = s.amax(-1, keepdim=True)
        p = torch.exp(s - m)
        l, acc = l + p.sum(-1, keepdim=True), acc + p @ V[:, full:]
    return acc / l
