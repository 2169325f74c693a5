# expect: wrong_algorithm
# mistake: tiles the queries, then a hand-written softmax over the whole row of keys (max, exp, sum over all S);
# exact, but the online softmax the problem teaches never runs
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    out = torch.empty_like(Q)
    for s in range(0, Q.shape[1], block_size):
        scores = torch.einsum("bqd,bkd->bqk", Q[:, s : s + block_size], K) / math.sqrt(Q.shape[-1])
        m = scores.max(dim=-1, keepdim=True).values
        p = torch.exp(scores - m)
        out[:, s : s + block_size] = torch.einsum("bqk,bkd->bqd", p, V) / p.sum(-1, keepdim=True)
    return out
