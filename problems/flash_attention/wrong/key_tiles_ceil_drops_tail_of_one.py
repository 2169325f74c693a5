# expect: wrong_answer
# mistake: ceil written by hand as S // block_size + (S % block_size > 1) (should be > 0): when S = k * block_size + 1 (k >= 1) the one-key ragged tail is dropped
import math
import torch

def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    q = Q.float() * scale
    O = torch.zeros(B, S, V.shape[-1], device=Q.device)
    l = torch.zeros(B, S, 1, device=Q.device)
    m = torch.full((B, S, 1), float('-inf'), device=Q.device)
    n_tiles = S // block_size + (1 if S % block_size > 1 else 0)
    for t in range(max(n_tiles, 1)):
        j = t * block_size
        s = q @ K[:, j:j + block_size].float().transpose(1, 2)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        a = torch.exp(m - m_new)
        l = a * l + p.sum(-1, keepdim=True)
        O = a * O + p @ V[:, j:j + block_size].float()
        m = m_new
    return (O / l).to(Q.dtype)
