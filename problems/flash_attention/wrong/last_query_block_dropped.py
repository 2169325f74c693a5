# expect: wrong_output
# mistake: loops over query blocks with range(S // block_size): when block_size does not divide S the ragged last
# block of queries is never computed, and the output is shorter than S
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for i in range(max(S // block_size, 1)):
        q = Q[:, i * block_size:(i + 1) * block_size] / math.sqrt(D)
        m = torch.full((B, q.shape[1], 1), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros(B, q.shape[1], 1, dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(B, q.shape[1], V.shape[-1], dtype=Q.dtype, device=Q.device)
        for ks in range(0, S, block_size):
            s = q @ K[:, ks:ks + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ V[:, ks:ks + block_size]
            m = m_new
        outs.append(acc / l)
    return torch.cat(outs, dim=1)
