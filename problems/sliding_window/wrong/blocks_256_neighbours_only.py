# expect: wrong_answer
# mistake: blocked local attention with 256-wide blocks ("the window is never wider than a block"): query block b looks only at key blocks b-1, b, b+1 before applying the exact band mask, so once 256 < window_size < S - 1 the in-window keys more than one block away are dropped
import math
import torch


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    T = 256
    scale = 1.0 / math.sqrt(D)
    outs = []
    for qs in range(0, S, T):
        qe = min(qs + T, S)
        lo, hi = max(0, qs - T), min(S, qe + T)
        s = Q[:, qs:qe] @ K[:, lo:hi].transpose(1, 2) * scale
        rows = torch.arange(qs, qe, device=Q.device)[:, None]
        cols = torch.arange(lo, hi, device=Q.device)[None, :]
        s = s.masked_fill((rows - cols).abs() > window_size, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ V[:, lo:hi])
    return torch.cat(outs, dim=1)
