# expect: wrong_answer
# mistake: slices each position's window as K[:, i - w : i + w + 1] without clamping the start at 0: near the start
# i - w is negative, Python counts it from the end, and the slice is empty or wrong
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    outs = []
    for i in range(S):
        k, v = K[:, i - window_size:i + window_size + 1], V[:, i - window_size:i + window_size + 1]
        if k.shape[1] == 0:
            k, v = K[:, i:i + 1], V[:, i:i + 1]
        w = torch.softmax(Q[:, i:i + 1] @ k.transpose(1, 2) / math.sqrt(D), dim=-1)
        outs.append(w @ v)
    return torch.cat(outs, dim=1)
