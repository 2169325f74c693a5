# expect: memory_limit
# mistake: pads K and V (masked with -inf) up to a multiple of block_size like a Triton kernel, without clamping block_size to S: block_size=2**30 ("one tile", allowed: block_size >= S) allocates a 2**30-row K and runs out of memory
import math
import torch
import torch.nn.functional as F


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    pad = (-S) % block_size
    Kp, Vp = F.pad(K, (0, 0, 0, pad)), F.pad(V, (0, 0, 0, pad))
    valid = torch.arange(S + pad, device=Q.device) < S
    m = torch.full((B, S, 1), float("-inf"), dtype=torch.float32, device=Q.device)
    l = torch.zeros(B, S, 1, dtype=torch.float32, device=Q.device)
    acc = torch.zeros(B, S, V.shape[-1], dtype=torch.float32, device=Q.device)
    q = Q.float() / math.sqrt(D)
    for ks in range(0, S + pad, block_size):
        s = q @ Kp[:, ks : ks + block_size].float().transpose(1, 2)
        s = s.masked_fill(~valid[ks : ks + block_size], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ Vp[:, ks : ks + block_size].float()
        m = m_new
    return (acc / l).to(Q.dtype)
