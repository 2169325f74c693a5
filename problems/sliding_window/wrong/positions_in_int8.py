# expect: wrong_answer
# mistake: builds the position grid in int8 "to keep the S x S distance matrix small": positions wrap past 127
import math
import torch


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    pos = torch.arange(S, device=Q.device).to(torch.int8)
    dist = (pos[:, None] - pos[None, :]).abs()
    scores = Q @ K.transpose(1, 2) / math.sqrt(D)
    scores = scores.masked_fill(dist > window_size, float("-inf"))
    return torch.softmax(scores, -1) @ V
