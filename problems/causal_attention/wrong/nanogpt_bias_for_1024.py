# expect: runtime_error
# mistake: nanoGPT's mask buffer copied as is: tril(ones(1024, 1024)) for the model's block_size, sliced [:T, :T]; this function has no block size, and a 4099-token sequence overruns it
import math

import torch
import torch.nn.functional as F

BLOCK_SIZE = 1024
_bias = torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE)).view(1, BLOCK_SIZE, BLOCK_SIZE)


def causal_attention(Q, K, V):
    B, T, C = Q.size()
    att = (Q @ K.transpose(-2, -1)) * (1.0 / math.sqrt(K.size(-1)))  # (B, T, T)
    att = att.masked_fill(_bias[:, :T, :T].to(Q.device) == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return att @ V
