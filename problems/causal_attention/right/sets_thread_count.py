# expect: accepted
# alternative: sets torch's thread count at import, as notebooks often do (the judge keeps its own count)
import torch

torch.set_num_threads(4)


def causal_attention(Q, K, V):
    # Q, K, V: (B, S, D)
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / D**0.5  # (B, S, S)
    future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(-1) @ V
