# expect: wrong_answer
# mistake: softmax over dim=1 of the (B, S, S) scores: normalises over queries, not keys
import math

import torch


def causal_attention(Q, K, V):
    S = Q.shape[1]
    scores = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(Q.shape[2])
    mask = torch.tril(torch.ones(S, S, device=Q.device)).bool()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.bmm(torch.softmax(scores, dim=1), V)
