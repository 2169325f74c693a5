# expect: wrong_answer
# mistake: detects self-attention by VALUE (torch.equal(Q, K)) and then uses Q for the keys: the forward is right but K's gradient is lost (and Q's doubled) when K is a separate tensor holding the same numbers
import math
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    if Q.shape == K.shape and torch.equal(Q, K):
        K = Q  # self-attention: one tensor for queries and keys
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
