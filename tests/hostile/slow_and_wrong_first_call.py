# expect: wrong_answer
# problem: sdpa
# The first call ever (a one-time "warm-up", like building a table or compiling) is slow AND wrong: it returns
# zeros. Every later call is right. The first run took longer than the per-case limit, so the judge re-runs the case
# on new inputs and judges only the re-run: the wrong first answer is never compared.
import math
import time

import torch

_warm = []


def scaled_dot_product_attention(Q, K, V, mask=None):
    if not _warm:
        _warm.append(True)
        time.sleep(1.5)
        return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device, requires_grad=True)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
