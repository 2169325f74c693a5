# expect: wrong_answer
# mistake: detects self-attention by value (torch.equal(Q, K)) and tiles Q as the keys: forward right, gradient w.r.t. a separate K with equal numbers is lost
import math
import torch


def flash_attention(Q, K, V, block_size=32):
    if torch.equal(Q, K):
        K = Q
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size].float()
        m = torch.full((B, q.shape[1], 1), float("-inf"), device=Q.device)
        l = torch.zeros(B, q.shape[1], 1, device=Q.device)
        acc = torch.zeros(B, q.shape[1], V.shape[-1], device=Q.device)
        for ks in range(0, S, block_size):
            k = K[:, ks:ks + block_size].float()
            v = V[:, ks:ks + block_size].float()
            s = q @ k.transpose(1, 2) * scale
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ v
            m = m_new
        outs.append(acc / l)
    return torch.cat(outs, dim=1).to(Q.dtype)
