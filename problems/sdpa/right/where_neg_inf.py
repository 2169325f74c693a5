# expect: accepted
# alternative: torch.where(mask, scores, -inf) broadcasts the mask for any leading dims, and einsum with an
# ellipsis handles any number of batch dims; Q, K, V named query, key, value (passed by position: any names do)
import math

import torch


def scaled_dot_product_attention(query, key, value, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(key.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    return torch.einsum("...qk,...kv->...qv", scores.softmax(dim=-1), value)
