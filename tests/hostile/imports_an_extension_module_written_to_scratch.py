# expect: forbidden_call
# Hostile (round 22): copies a compiled extension module into the scratch folder and imports it from there: a real
# attack writes its own, whose native code would run in the worker, out of every guard's sight. An extension module
# of the learner's (beside the file, or written by it) is refused, as a bare .pyc is.
import glob
import importlib.util
import math
import os
import shutil

import torch

found = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "lib-dynload", "_lsprof*.so")))
shutil.copyfile(found[0], os.path.basename(found[0]))
spec = importlib.util.spec_from_file_location("_lsprof", os.path.abspath(os.path.basename(found[0])))
native = importlib.util.module_from_spec(spec)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
