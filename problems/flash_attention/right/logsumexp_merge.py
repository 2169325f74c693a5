# expect: accepted
# alternative: per-tile softmax outputs merged with their log-sum-exp weights (kept in float32: a float16
# log-sum-exp of scores near -500 is off by a quarter, which exp turns into 28%)
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    outs = []
    for qs in range(0, S, block_size):
        q = Q[:, qs : qs + block_size] / math.sqrt(D)
        out, lse = None, None
        for ks in range(0, S, block_size):
            s = (q @ K[:, ks : ks + block_size].transpose(1, 2)).float()  # (B, bq, bk)
            tile_lse = torch.logsumexp(s, dim=-1, keepdim=True)  # (B, bq, 1)
            tile_out = (torch.softmax(s, dim=-1).to(V.dtype) @ V[:, ks : ks + block_size]).float()
            if out is None:
                out, lse = tile_out, tile_lse
            else:
                new_lse = torch.logaddexp(lse, tile_lse)
                out = out * torch.exp(lse - new_lse) + tile_out * torch.exp(tile_lse - new_lse)
                lse = new_lse
        outs.append(out.to(Q.dtype))
    return torch.cat(outs, dim=1)
