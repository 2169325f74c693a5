# expect: forbidden_call
# Hostile (review30): a spec whose loader names the installed file and whose origin names the scratch copy:
# the check read the loader's path, create_dynamic loads the origin (accepted before, refused now).
import glob
import importlib.machinery
import importlib.util
import math
import os
import shutil

import torch

found = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "lib-dynload", "_lsprof*.so")))
shutil.copyfile(found[0], os.path.basename(found[0]))
loader = importlib.machinery.ExtensionFileLoader("_lsprof", found[0])
spec = importlib.util.spec_from_file_location("_lsprof", os.path.abspath(os.path.basename(found[0])), loader=loader)
native = importlib.util.module_from_spec(spec)
with open('/proc/self/maps') as m:
    assert any(os.getcwd() in line and '_lsprof' in line for line in m), 'not mapped'


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
