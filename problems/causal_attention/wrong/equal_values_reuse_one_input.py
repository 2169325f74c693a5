# expect: wrong_answer
# mistake: detects self-attention by VALUE (torch.equal(Q, K)) and reuses Q as the keys: forward right, but the gradient w.r.t. a separate K with equal numbers is lost
import math
import torch


def causal_attention(Q, K, V):
    if torch.equal(Q, K):
        K = Q
    S, D = Q.shape[1], Q.shape[2]
    s = Q @ K.transpose(1, 2) / math.sqrt(D)
    mask = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
    return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ V
