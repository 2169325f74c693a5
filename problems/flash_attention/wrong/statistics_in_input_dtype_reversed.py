# expect: wrong_answer
# mistake: keeps the running max, sum and accumulator in the inputs' dtype, walking the key tiles last to first: when the
#   dominant key comes last, the small tiles before it add up exactly, and only the keys' other order shows the loss
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    out_blocks = []
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size] / math.sqrt(D)
        bq = q.shape[1]
        m = torch.full((B, bq, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros(B, bq, 1, dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(B, bq, V.shape[-1], dtype=Q.dtype, device=Q.device)
        for ks in reversed(range(0, S, block_size)):
            s = q @ K[:, ks:ks + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            acc = alpha * acc + p @ V[:, ks:ks + block_size]
            m = m_new
        out_blocks.append(acc / l)
    return torch.cat(out_blocks, dim=1)
