# expect: runtime_error
# problem: flash_attention
# Hostile (review28): an attribute name of a str subclass whose hash is that of "__globals__" and which equals every
# name: the replaced getattr checked its text ("harmless") but handed the subclass itself to the real one, whose
# lookup then found __globals__. The real one is handed the exact text checked: there is no attribute "harmless".
import math

import torch


class Name(str):
    def __hash__(self):
        return hash("__glob" + "als__")

    def __eq__(self, other):
        return True


def flash_attention(Q, K, V, block_size=32):
    g = getattr(getattr, Name("harmless"))["_ACT" + "IVE"][-1]
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
