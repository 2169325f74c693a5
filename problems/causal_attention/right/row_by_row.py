# expect: accepted
# alternative: one query at a time over its own prefix
import math

import torch


def causal_attention(Q, K, V):
    rows = []
    for i in range(Q.shape[1]):
        s = Q[:, i : i + 1] @ K[:, : i + 1].transpose(1, 2) / math.sqrt(Q.shape[-1])  # (B, 1, i+1)
        rows.append(torch.softmax(s, dim=-1) @ V[:, : i + 1])  # (B, 1, D)
    return torch.cat(rows, dim=1)
