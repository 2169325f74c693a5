# expect: wrong_answer
# mistake: takes the running max of the unscaled scores, then exponentiates the scaled ones: exp(s / sqrt(D) - m)
# with m = max(s), which is a different shift per block; the running sum and accumulator no longer agree
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    m = torch.full((B, S, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros_like(V)
    for ks in range(0, S, block_size):
        s = Q @ K[:, ks:ks + block_size].transpose(1, 2)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s * scale - m_new)
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ V[:, ks:ks + block_size]
        m = m_new
    return acc / l
