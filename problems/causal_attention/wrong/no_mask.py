# expect: wrong_answer
# mistake: no mask at all
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    return torch.softmax(scores, dim=-1) @ V
