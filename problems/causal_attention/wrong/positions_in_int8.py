# expect: wrong_answer
# mistake: position grid in int8 ("small mask"): positions wrap past 127, so tokens 128+ see the wrong keys
import math
import torch


def causal_attention(Q, K, V):
    B, S, D = Q.shape
    pos = torch.arange(S, device=Q.device).to(torch.int8)
    scores = Q @ K.transpose(1, 2) / math.sqrt(D)
    scores = scores.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
    return torch.softmax(scores, -1) @ V
