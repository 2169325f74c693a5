# expect: runtime_error
# mistake: the additive causal bias is made with torch.full(...) in the default dtype (float32): bfloat16 or float16
# scores plus a float32 bias become float32, and the float32 weights then meet the half-precision V
import math

import torch


def causal_attention(Q, K, V):
    S = Q.shape[1]
    bias = torch.full((S, S), float("-inf"), device=Q.device).triu(1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]) + bias
    return torch.softmax(scores, dim=-1) @ V
