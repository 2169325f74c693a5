# expect: wrong_answer
# mistake: fills the future with -1e4 instead of -inf: a query whose allowed scores are all below -1e4 puts its
# weight on the future
import math

import torch


def causal_attention(Q, K, V):
    B, S, D = Q.shape
    scores = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(D)
    future = torch.triu(torch.ones(S, S, dtype=torch.bool, device=Q.device), diagonal=1)
    scores = scores.masked_fill(future, -1e4)
    return torch.bmm(torch.softmax(scores, dim=-1), V)
