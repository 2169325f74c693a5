# expect: accepted
# alternative: nanoGPT's CausalSelfAttention mask: a lower-triangular buffer for the longest context, sliced to
# [:T, :T], compared with 0 in masked_fill; built again, larger, for a longer sequence (no fixed context here)
import math

import torch
import torch.nn.functional as F

BLOCK_SIZE = 1024
_bias = torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE)).view(1, BLOCK_SIZE, BLOCK_SIZE)


def causal_attention(Q, K, V):
    global _bias
    B, T, C = Q.size()
    if T > _bias.size(-1):  # longer than any context seen: a larger buffer
        _bias = torch.tril(torch.ones(T, T)).view(1, T, T)
    att = (Q @ K.transpose(-2, -1)) * (1.0 / math.sqrt(K.size(-1)))
    att = att.masked_fill(_bias[:, :T, :T].to(Q.device) == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ V
