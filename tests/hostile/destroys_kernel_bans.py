# expect: forbidden_call
# Finds the grader's kernel bans (a torch.library.Library) with the garbage collector and destroys
# them with a name built at run time, then calls the fused kernel.
import importlib

import torch
import torch.nn.functional as F

_gc = importlib.import_module("g" + "c")
for obj in getattr(_gc, "get_" + "objects")():
    if isinstance(obj, torch.library.Library):
        getattr(obj, "_de" + "stroy")()


def scaled_dot_product_attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
