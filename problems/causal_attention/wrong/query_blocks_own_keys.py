# expect: wrong_answer
# mistake: processes queries in blocks of 8 and gives each block only the keys of its own block (the causal
# mask inside the block is right): from position 8 on, a query loses sight of every earlier block
import math

import torch


BLOCK = 8


def causal_attention(Q, K, V):
    S = Q.shape[1]
    outs = []
    for s in range(0, S, BLOCK):
        q, k, v = Q[:, s:s + BLOCK], K[:, s:s + BLOCK], V[:, s:s + BLOCK]
        n = q.shape[1]
        scores = q @ k.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        mask = torch.ones(n, n, dtype=torch.bool, device=Q.device).tril()
        outs.append(torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v)
    return torch.cat(outs, dim=1)
