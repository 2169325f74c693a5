# expect: wrong_answer
# mistake: measures the distance as i - j on uint8 positions ("positions are small and non-negative"): below the
# diagonal it wraps around to 256 - (j - i), so every key to the right of a query falls outside its window
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    pos = torch.arange(S, device=Q.device, dtype=torch.uint8)
    outside = (pos[:, None] - pos[None, :]) > window_size
    scores = (Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])).masked_fill(outside, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
