# expect: forbidden_call
# problem: flash_attention
# Takes thousands of truth values out of torch in one call (bool() of an element at a time: data leaving torch a bit at
# a time where the case measures work). A truth value per tile is fine (right/rescale_when_a_max_moved.py); past
# 4096 in one call it is refused like item() past 256.
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    bits = sum(bool(x > 0) for x in Q.reshape(-1)[:5000])  # one bit of each input element, read one by one
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]) + 0 * bits
    return torch.softmax(scores, dim=-1) @ V
