# expect: forbidden_call
# problem: flash_attention
# Hostile: Python's C API through ctypes (PyEval_GetFrame: the current frame, not asked of sys) and from there the
# grader's frames and the guard in their locals. ctypes for Python's own functions is refused to the learner's code
# (reflection.py); ctypes for the system's (the confinement's tests) is not.
import ctypes
import math

import torch


def _attr(o, name):  # a frame's attribute through its type's descriptor (no name the scan reads, no getattr)
    return type(o).__dict__[name].__get__(o)


def _guard():
    api = ctypes.PyDLL(None)
    get = api.PyEval_GetFrame
    get.restype = ctypes.py_object
    frame = get()
    while frame is not None:
        for value in _attr(frame, "f_" + "locals").values():
            if type(value).__name__ == "Guard":
                return value
        frame = _attr(frame, "f_" + "back")


def flash_attention(Q, K, V, block_size=32):
    g = _guard()
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
