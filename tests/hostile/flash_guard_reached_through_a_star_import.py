# expect: forbidden_call
# problem: flash_attention
# Hostile (review28): operator's attrgetter (a C function: the replaced getattr never sees what it reads), brought in
# by a star import so that its name never appears in the source, reads the replaced getattr's globals. Star imports
# from the modules that hold such tools are refused by the scan.
import math

import torch
from operator import *  # noqa: F403


def flash_attention(Q, K, V, block_size=32):
    g = globals()["attr" + "getter"]("__glob" + "als__")(getattr)["_ACT" + "IVE"][-1]
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
