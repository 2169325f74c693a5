# expect: accepted
# needs: confinement
# Tries to write into the progress store and the problem folders; both are refused, the answer is still graded.
import importlib.util
import os

def _attention(Q, K, V, mask=None):
    import math

    import torch

    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V

HITS = []
for target in (os.environ.get("TORCHCODE_HOME", "") + "/progress.sqlite3",
               os.path.join(os.path.dirname(importlib.util.find_spec("torch" + "code").origin), "..", "problems", "sdpa",
                            "cases.py")):
    try:
        with open(target, "a") as f:
            f.write("tampered")
        HITS.append(target)
    except OSError:
        pass
if HITS:
    raise SystemExit("wrote into " + ", ".join(HITS))


def scaled_dot_product_attention(Q, K, V, mask=None):
    return _attention(Q, K, V, mask)
