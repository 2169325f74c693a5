# expect: wrong_answer
# mistake: "full attention" fast path taken when window_size >= S - 2 (should be >= S - 1): with w = S - 2 the
# corner pairs (0, S-1) and (S-1, 0) are wrongly attended
import math
import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    if window_size < S - 2:
        i = torch.arange(S, device=Q.device)
        band = (i[:, None] - i[None, :]).abs() <= window_size
        scores = scores.masked_fill(~band, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
