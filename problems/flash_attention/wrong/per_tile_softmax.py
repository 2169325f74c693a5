# expect: wrong_answer
# mistake: normalises each tile on its own and averages the tiles
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs : qs + block_size] / math.sqrt(D)
        parts = []
        for ks in range(0, S, block_size):
            s = q @ K[:, ks : ks + block_size].transpose(1, 2)
            parts.append(torch.softmax(s, -1) @ V[:, ks : ks + block_size])
        outs.append(torch.stack(parts).mean(0))
    return torch.cat(outs, 1)
