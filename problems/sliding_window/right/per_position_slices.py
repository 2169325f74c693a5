# expect: accepted
# alternative: each query attends to its own slice of keys (linear memory)
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    out = []
    for i in range(S):
        lo, hi = max(0, i - window_size), min(S, i + window_size + 1)
        s = Q[:, i : i + 1] @ K[:, lo:hi].transpose(1, 2) / math.sqrt(Q.shape[-1])
        out.append(torch.softmax(s, dim=-1) @ V[:, lo:hi])
    return torch.cat(out, dim=1)
