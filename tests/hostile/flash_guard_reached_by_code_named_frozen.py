# expect: forbidden_call
# problem: flash_attention
# Hostile (review28): code compiled under the name of Python's own frozen import machinery, whose frames the run-time
# refusals (reflection.py) take for Python's, reads the guard out of the replaced getattr's globals and switches its
# memory limit off for the full S x S matrix. Compiling under a <frozen ...> name is refused to the learner's code.
import math

import torch

_SRC = '\ndef reach():\n    return getattr(getattr, "__glob" + "als__")["_ACT" + "IVE"][-1]\n'
_NS = {}
exec(compile(_SRC, "<frozen importlib._bootstrap>", "exec"), _NS)


def flash_attention(Q, K, V, block_size=32):
    g = _NS["reach"]()
    limit, g.max_elements = g.max_elements, None
    out = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V
    g.max_elements, g.largest, g.largest_shape, g.widest = limit, 0, [], [0, "", []]
    return out
