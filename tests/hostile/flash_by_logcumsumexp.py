# expect: wrong_algorithm
# problem: flash_attention
# A plain softmax over all S keys in disguise: the normaliser of each row of scores is the last entry of
# logcumsumexp (a scan the widest-reduction check did not know), and the product with V takes the keys in
# two halves (each under the bound). Half the queries at a time, so no tensor holds B x S x S elements;
# but every row of scores is combined over all S keys at once, which a flash kernel never does.
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    S = Q.shape[1]
    h = max(S // 2, 1)
    out = []
    for i in range(0, S, h):
        s = Q[:, i:i + h] @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (B, h, S): half the rows
        p = torch.exp(s - torch.logcumsumexp(s, -1)[..., -1:])
        out.append(p[..., :h] @ V[:, :h] + p[..., h:] @ V[:, h:])
    return torch.cat(out, 1)
