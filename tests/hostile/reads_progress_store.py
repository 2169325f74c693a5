# expect: runtime_error
# needs: confinement
# Reads the progress store. TORCHCODE_HOME is inherited; a relative one is relative to where the check
# was started (this file's folder, when tests/test_hostile.py runs it that way).
import math
import os

import torch

home = os.environ.get("TORCHCODE_HOME") or os.path.expanduser("~/.local/share/torchcode")
store = os.path.join(os.path.dirname(os.path.abspath(__file__)), home, "progress.sqlite3")
STOLEN = open(store, "rb").read()


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
