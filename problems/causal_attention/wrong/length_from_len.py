# expect: runtime_error
# mistake: takes the sequence length as len(Q), which is the batch size for (B, S, D) inputs
import math

import torch


def causal_attention(Q, K, V):
    S = len(Q)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    mask = torch.tril(torch.ones(S, S, dtype=torch.bool, device=Q.device))
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ V
