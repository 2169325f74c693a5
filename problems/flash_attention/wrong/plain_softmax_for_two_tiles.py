# expect: too_much_memory
# mistake: "shortcut" for small inputs: when the keys fit in two tiles (S <= 2 * block_size) it does a plain
# softmax over the full S x S scores, breaking the tiling/memory contract whenever block_size < S <= 2 * block_size
import math
import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    if S <= 2 * block_size:
        return torch.softmax(Q @ K.transpose(-2, -1) * scale, dim=-1) @ V
    out = []
    for i in range(0, S, block_size):
        q = Q[:, i:i + block_size] * scale
        m = torch.full((B, q.shape[1], 1), float("-inf"), device=Q.device, dtype=torch.float32)
        l = torch.zeros(B, q.shape[1], 1, device=Q.device, dtype=torch.float32)
        acc = torch.zeros(B, q.shape[1], V.shape[-1], device=Q.device, dtype=torch.float32)
        for j in range(0, S, block_size):
            s = (q @ K[:, j:j + block_size].transpose(-2, -1)).float()
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            alpha = torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ V[:, j:j + block_size].float()
            m = m_new
        out.append(acc / l)
    return torch.cat(out, dim=1).to(Q.dtype)
