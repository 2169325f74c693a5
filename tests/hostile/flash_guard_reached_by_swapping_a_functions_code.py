# expect: forbidden_call
# problem: flash_attention
# Hostile (review28): the replaced builtin getattr is the grader's function; its code swapped for the learner's (set
# through the function type's descriptor, a name the scan cannot read) runs with the grader's globals and hands
# back the guard. A function's code swapped is refused to the learner's code by the audit hook (reflection.py).
import math

import torch


def _peek(obj, name, *default):
    return _ACTIVE  # noqa: F821 - a global of the function whose code this becomes


def flash_attention(Q, K, V, block_size=32):
    code = type(getattr).__dict__["__co" + "de__"]
    real = code.__get__(getattr)
    code.__set__(getattr, code.__get__(_peek))
    try:
        g = getattr(None, None)[-1]
    finally:
        code.__set__(getattr, real)
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
