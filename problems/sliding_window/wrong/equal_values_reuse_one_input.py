# expect: wrong_answer
# mistake: detects self-attention by VALUE (torch.equal(Q, K)) and reuses Q as the keys: forward right, the gradient w.r.t. a separate K holding the same numbers is lost
import math
import torch


def sliding_window_attention(Q, K, V, window_size):
    if torch.equal(Q, K):
        K = Q
    S, D = Q.shape[1], Q.shape[2]
    s = Q @ K.transpose(1, 2) / math.sqrt(D)
    i = torch.arange(S, device=Q.device)
    band = (i[:, None] - i[None, :]).abs() <= window_size
    return torch.softmax(s.masked_fill(~band, float("-inf")), dim=-1) @ V
