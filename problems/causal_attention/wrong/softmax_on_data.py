# expect: wrong_answer
# mistake: old-tutorial style `.data`: the softmax is taken of scores.data, which autograd does not see, so no
# gradient reaches Q or K (only V's gradient is right)
import math

import torch


def causal_attention(Q, K, V):
    S = Q.shape[1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    weights = torch.softmax(scores.data.masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ V
