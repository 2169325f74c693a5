# expect: wrong_answer
# mistake: fills the future with torch.finfo(torch.float16).min (-65504, "safe in half precision") in every
# dtype: in float32 or bfloat16 a query whose allowed scores are all below -65504 puts its weight on the future
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2:]
    s = Q @ K.transpose(-2, -1) / math.sqrt(D)
    future = torch.triu(torch.ones(S, S, dtype=torch.bool, device=Q.device), diagonal=1)
    s = s.masked_fill(future, torch.finfo(torch.float16).min)
    return torch.softmax(s, dim=-1) @ V
