# expect: accepted
# alternative: the mask from PyTorch's own CausalBias object (torch.nn.attention.bias.causal_upper_left), materialized
import math
import torch
from torch.nn.attention.bias import causal_upper_left


def causal_attention(Q, K, V):
    keep = causal_upper_left(Q.shape[-2], K.shape[-2])._materialize(Q.device)
    s = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ V
