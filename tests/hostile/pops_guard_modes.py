# expect: forbidden_call
# problem: flash_attention
# Pops the grader's modes with names built at run time (the source scan reads names only), then
# builds the full S x S score matrix the memory guard is there to catch. The guard finds its modes
# gone after the call.
import importlib
import math

import torch

_pop = getattr(importlib.import_module("torch.utils._python_dispatch"), "_pop" + "_mode")
_pop_fn = getattr(torch._C, "_pop_torch_" + "function_stack")


def flash_attention(Q, K, V, block_size=32):
    _pop()
    _pop_fn()
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    return torch.softmax(s, dim=-1) @ V
