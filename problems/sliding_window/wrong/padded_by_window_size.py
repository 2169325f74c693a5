# expect: memory_limit
# mistake: F.pad + unfold windows without clamping window_size to S: a "global" window such as 10**8 (allowed: window_size may exceed S) pads K and V by 2 * window_size rows and runs out of memory
import math

import torch
import torch.nn.functional as F


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    w = window_size
    Kw = F.pad(K, (0, 0, w, w)).unfold(1, 2 * w + 1, 1)  # (B, S, D, 2w+1)
    Vw = F.pad(V, (0, 0, w, w)).unfold(1, 2 * w + 1, 1)
    pos = torch.arange(S, device=Q.device)[:, None] + torch.arange(-w, w + 1, device=Q.device)  # key index
    inside = (pos >= 0) & (pos < S)
    scores = torch.einsum("bsd,bsdw->bsw", Q, Kw) / math.sqrt(D)
    scores = scores.masked_fill(~inside, float("-inf"))
    return torch.einsum("bsw,bsdw->bsd", scores.softmax(-1), Vw)
