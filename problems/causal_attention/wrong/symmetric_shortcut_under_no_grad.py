# expect: wrong_answer
# mistake: an inference-only (torch.no_grad) fast path for Q is K treats the scores as symmetric and masks the transposed triangle with the softmax over dim -2, no transpose back
import math

import torch


def causal_attention(Q, K, V):
    S = Q.shape[-2]
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if Q is K and not torch.is_grad_enabled():  # inference self-attention: symmetric scores, work column-wise
        future = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril(-1)
        w = torch.softmax(s.masked_fill(future, float("-inf")), dim=-2)
    else:
        future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)
        w = torch.softmax(s.masked_fill(future, float("-inf")), dim=-1)
    return w @ V
