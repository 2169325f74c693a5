# expect: wrong_answer
# mistake: gathers each window with F.pad + unfold but lets the zero padding at the edges into the softmax
import math

import torch
import torch.nn.functional as F


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    w = min(window_size, S)
    Kp = F.pad(K, (0, 0, w, w)).unfold(1, 2 * w + 1, 1)  # (B, S, D, 2w+1): zero keys outside the sequence
    Vp = F.pad(V, (0, 0, w, w)).unfold(1, 2 * w + 1, 1)
    scores = torch.einsum("bsd,bsdw->bsw", Q, Kp) / math.sqrt(D)
    return torch.einsum("bsw,bsdw->bsd", scores.softmax(-1), Vp)
