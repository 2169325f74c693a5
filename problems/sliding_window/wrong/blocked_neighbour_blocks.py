# expect: wrong_answer
# mistake: memory-efficient blocked local attention: queries in block b (32 positions) only look at key blocks b-1, b, b+1 before the exact band mask: every key farther than one block is silently dropped once 32 < window_size < S - 1
import math
import torch

BLOCK = 32


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    w = window_size
    scale = 1.0 / math.sqrt(D)
    if w >= S - 1:  # the window covers everything: plain attention
        return torch.softmax(Q @ K.transpose(1, 2) * scale, -1) @ V
    out = []
    pos = torch.arange(S, device=Q.device)
    for qs in range(0, S, BLOCK):
        qe = min(qs + BLOCK, S)
        ks, ke = max(0, qs - BLOCK), min(S, qe + BLOCK)
        s = Q[:, qs:qe] @ K[:, ks:ke].transpose(1, 2) * scale
        keep = (pos[qs:qe, None] - pos[None, ks:ke]).abs() <= w
        s = s.masked_fill(~keep, float("-inf"))
        out.append(torch.softmax(s, -1) @ V[:, ks:ke])
    return torch.cat(out, 1)
