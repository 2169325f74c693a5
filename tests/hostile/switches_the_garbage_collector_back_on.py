# expect: forbidden_call
# problem: sdpa
# hostile: correct attention that switches the garbage collector back on during the call (the guard keeps it off: its
# finalizers would run inside the guards' own handlers, unwatched): a guard switched off is a forbidden call
import gc
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    gc.enable()
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V
