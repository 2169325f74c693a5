# expect: wrong_answer
# mistake: no running max: exp of raw scores overflows for large scores
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs : qs + block_size] / math.sqrt(D)
        l = torch.zeros(B, q.shape[1], 1, dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(B, q.shape[1], D, dtype=Q.dtype, device=Q.device)
        for ks in range(0, S, block_size):
            p = torch.exp(q @ K[:, ks : ks + block_size].transpose(1, 2))
            l = l + p.sum(-1, keepdim=True)
            acc = acc + p @ V[:, ks : ks + block_size]
        outs.append(acc / l)
    return torch.cat(outs, 1)
