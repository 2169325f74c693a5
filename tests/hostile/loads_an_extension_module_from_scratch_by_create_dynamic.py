# expect: forbidden_call
# Hostile (review30): an extension module copied to the scratch folder, loaded by _imp.create_dynamic (what
# ExtensionFileLoader.create_module calls; only that method was checked): accepted before, refused now.
import _imp
import glob
import importlib.util
import math
import os
import shutil

import torch

found = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "lib-dynload", "_lsprof*.so")))
shutil.copyfile(found[0], os.path.basename(found[0]))
spec = importlib.util.spec_from_file_location("_lsprof", os.path.abspath(os.path.basename(found[0])))
native = _imp.create_dynamic(spec)
with open('/proc/self/maps') as m:
    assert any(os.getcwd() in line and '_lsprof' in line for line in m), 'not mapped'


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
