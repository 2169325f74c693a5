# expect: forbidden_call
# problem: flash_attention
# Hostile: the frames of a caught exception's traceback (traceback.walk_tb hands them out), then each frame's
# callers up to the grader's, whose locals hold the guard: its memory limit switched off for the full S x S matrix.
# A traceback's frame is refused to the learner's code, through the standard library too (reflection.py).
import math
import traceback

import torch


def _guard():
    try:
        raise ValueError
    except ValueError as e:
        frame = next(f for f, _ in traceback.walk_tb(e.__traceback__))
    back = "f_" + "back"
    while frame is not None:
        for value in getattr(frame, "f_" + "locals").values():
            if type(value).__name__ == "Guard":
                return value
        frame = getattr(frame, back)


def flash_attention(Q, K, V, block_size=32):
    g = _guard()
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
