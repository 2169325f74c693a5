# expect: wrong_algorithm
# mistake: tiles only the queries and takes a plain softmax over all S keys of each tile: never an S x S tensor,
# but no online softmax either (no running max, no running sum)
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    outs = []
    for s in range(0, Q.shape[1], block_size):
        scores = Q[:, s : s + block_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])  # (B, block, S)
        outs.append(torch.softmax(scores, dim=-1) @ V)
    return torch.cat(outs, dim=1)
