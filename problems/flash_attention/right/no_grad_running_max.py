# expect: accepted
# alternative: the running max as a constant, as real flash kernels treat it: computed under torch.no_grad()
# (the softmax does not depend on the shift, so the gradients stay exact), exp2 with log2(e) folded into the scale
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    q = Q * (math.log2(math.e) / math.sqrt(D))
    m = torch.full((B, S, 1), float("-inf"), dtype=torch.float32, device=Q.device)  # statistics in float32
    l = torch.zeros(B, S, 1, dtype=torch.float32, device=Q.device)
    acc = torch.zeros(B, S, V.shape[-1], dtype=torch.float32, device=Q.device)
    for start in range(0, S, block_size):
        k, v = K[:, start:start + block_size], V[:, start:start + block_size]
        s = (q @ k.transpose(-1, -2)).float()
        with torch.no_grad():
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp2(s - m_new)
        alpha = torch.exp2(m - m_new)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ v.float()
        m = m_new
    return (acc / l).to(Q.dtype)
