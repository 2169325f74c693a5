# expect: wrong_answer
# mistake: inference-only (torch.no_grad) self-attention fast path (Q is K): the band and the scores are symmetric, so it takes the softmax over dim -2 and forgets to transpose back
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[-2]
    pos = torch.arange(S, device=Q.device)
    band = (pos[:, None] - pos[None, :]).abs() <= window_size
    s = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).masked_fill(~band, float("-inf"))
    w = torch.softmax(s, dim=-2 if not torch.is_grad_enabled() and Q is K else -1)
    return w @ V
