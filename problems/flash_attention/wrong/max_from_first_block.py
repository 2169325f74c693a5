# expect: wrong_answer
# mistake: computes m_new but never assigns it back to m, so every block is shifted by the first block's max: exp overflows when a later block has larger scores
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = None
    for ks in range(0, S, block_size):
        s = Q @ K[:, ks : ks + block_size].transpose(1, 2) / math.sqrt(D)
        if m is None:
            m = s.amax(-1, keepdim=True)
            l = torch.zeros_like(m)
            acc = torch.zeros(B, S, V.shape[-1], dtype=Q.dtype, device=Q.device)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m)
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ V[:, ks : ks + block_size]
    return acc / l
