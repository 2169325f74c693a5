# expect: wrong_answer
# mistake: when one tile holds the whole sequence (block_size >= S) a plain softmax written by hand without
#   subtracting the max: large-magnitude scores overflow (the tiled path is right)
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    if block_size >= S:  # one tile: no need for the online softmax
        e = torch.exp(Q @ K.transpose(-2, -1) * scale)
        return (e / e.sum(-1, keepdim=True)) @ V
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size]
        m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=torch.float32, device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[0], q.shape[1], V.size(-1), dtype=torch.float32, device=Q.device)
        for ks in range(0, S, block_size):
            k, v = K[:, ks:ks + block_size], V[:, ks:ks + block_size]
            s = (q @ k.transpose(-2, -1)).float() * scale
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            c = torch.exp(m - m_new)
            l = l * c + p.sum(-1, keepdim=True)
            acc = acc * c + p @ v.float()
            m = m_new
        outs.append((acc / l).to(Q.dtype))
    return torch.cat(outs, dim=1)
