# expect: forbidden_call
# problem: flash_attention
# Hostile (review30): hands getattr to importlib's frozen _call_with_frames_removed, whose frame passed for
# Python's own import machinery, so the run-time refusals let it read the dispatch-mode stack; it switches the
# memory limit off for the full S x S matrix (accepted 23/23). Frozen functions that call what they are handed
# are looked through: their caller decides.
import importlib._bootstrap as bs
import math

import torch
from torch.utils import _python_dispatch as pd

via = bs._call_with_frames_removed


def flash_attention(Q, K, V, block_size=32):
    stack = via(via(getattr, pd, "_get_current_dispatch" + "_mode_stack"))
    g = next(m.guard for m in stack if hasattr(m, "guard"))
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
