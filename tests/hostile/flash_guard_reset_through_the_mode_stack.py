# expect: forbidden_call
# problem: flash_attention
# Hostile: reaches the guard through torch's dispatch mode stack (its getter named by a string built at run time,
# then found through the module's __dict__), switches the memory limit off, builds the full S x S score matrix and
# puts the guard's measures back as they were. The getter refuses the learner's code (reflection.py).
import math

import torch
from torch.utils import _python_dispatch as pd


def flash_attention(Q, K, V, block_size=32):
    stack = pd.__dict__["_get_current_dispatch_mode" + "_stack"]()
    g = next(m.guard for m in stack if hasattr(m, "guard"))
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
