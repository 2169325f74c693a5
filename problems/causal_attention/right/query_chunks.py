# expect: accepted
# alternative: queries in chunks of 4, each attending only to the keys up to its last position
import math

import torch


def causal_attention(Q, K, V, chunk=4):
    S, D = Q.shape[1], Q.shape[2]
    outs = []
    for start in range(0, S, chunk):
        end = min(start + chunk, S)
        s = Q[:, start:end] @ K[:, :end].transpose(1, 2) / math.sqrt(D)  # (B, c, end)
        rows = torch.arange(start, end, device=Q.device)[:, None]
        cols = torch.arange(end, device=Q.device)[None, :]
        s = s.masked_fill(cols > rows, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ V[:, :end])
    return torch.cat(outs, dim=1)
