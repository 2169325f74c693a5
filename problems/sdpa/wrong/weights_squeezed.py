# expect: runtime_error
# mistake: the weights are .squeeze()d before "@ V" (to drop a size-1 dim): a batch of single queries, or a single
# key, loses its batch dim too; right only for unbatched inputs and batch 1
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(K.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1).squeeze()
    out = w @ V
    return out.reshape(*Q.shape[:-1], V.shape[-1])
