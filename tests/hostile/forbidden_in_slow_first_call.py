# expect: forbidden_call
# problem: sdpa
# Tries the fused kernel (forbidden here) in its first call, swallowing the refusal, during a slow one-time warm-up;
# every call then computes by hand. The guard's "forbidden" note about the first run is sent, but the first run took
# longer than the per-case limit, so the judge starts a fresh Notes() for the re-run and the note is dropped.
import math
import time

import torch
import torch.nn.functional as F

_warm = []


def scaled_dot_product_attention(Q, K, V, mask=None):
    if not _warm:
        _warm.append(True)
        time.sleep(1.5)
        try:
            F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
        except Exception:
            pass
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
