# expect: wrong_answer
# mistake: writes the result into an output buffer kept per shape and returns it, so the next call of the same shape overwrites the previous result
import math

import torch

_buffers = {}


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    key = (B, S, V.shape[-1], Q.dtype, Q.device)
    if key not in _buffers:
        _buffers[key] = torch.empty(B, S, V.shape[-1], dtype=Q.dtype, device=Q.device)
    out = _buffers[key]
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size] / math.sqrt(D)
        m = torch.full((B, q.shape[1], 1), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(B, q.shape[1], V.shape[-1], dtype=Q.dtype, device=Q.device)
        for ks in range(0, S, block_size):
            s = q @ K[:, ks:ks + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ V[:, ks:ks + block_size]
            m = m_new
        out[:, qs:qs + q.shape[1]] = acc / l
    return out
