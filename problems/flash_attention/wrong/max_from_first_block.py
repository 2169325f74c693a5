# expect: wrong_answer
# mistake: computes m_new but never assigns it back to m, so every block is shifted by the first block's max: exp overflows when a later block has larger scores
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs : qs + block_size] / math.sqrt(D)
        m = l = acc = None
        for ks in range(0, S, block_size):
            s = q @ K[:, ks : ks + block_size].transpose(1, 2)
            if m is None:
                m = s.amax(-1, keepdim=True)
                l = torch.zeros_like(m)
                acc = torch.zeros(q.shape[0], q.shape[1], V.shape[-1], dtype=Q.dtype, device=Q.device)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m)
            l = l + p.sum(-1, keepdim=True)
            acc = acc + p @ V[:, ks : ks + block_size]
        outs.append(acc / l)
    return torch.cat(outs, dim=1)
