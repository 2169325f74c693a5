# expect: accepted
# alternative: running max, sum and accumulator kept in float32 whatever the input dtype (as the CUDA kernels do)
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    m = torch.full((B, S, 1), float("-inf"), dtype=torch.float32, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=torch.float32, device=Q.device)
    acc = torch.zeros(B, S, V.shape[-1], dtype=torch.float32, device=Q.device)
    q = Q.float() / math.sqrt(D)
    for ks in range(0, S, block_size):
        s = q @ K[:, ks : ks + block_size].float().transpose(1, 2)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ V[:, ks : ks + block_size].float()
        m = m_new
    return (acc / l).to(Q.dtype)
