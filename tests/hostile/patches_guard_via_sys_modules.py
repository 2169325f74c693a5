# expect: runtime_error
# Looks for the grader's guard module in sys.modules (with a built name, past the source scan) to disarm
# it before calling the fused kernel. The grader takes its modules out of sys.modules before any
# submission code runs, so there is nothing to find (and the fused kernel refuses anyway).
import sys

import torch.nn.functional as F

found = [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "torch" + "code"]
if not found:
    raise LookupError("the grader's modules are not in sys.modules")
for module in found:
    for attr in ("Guard", "_CallGuard", "_KernelGuard"):
        cls = getattr(module, attr, None)
        if cls is not None:
            setattr(cls, "forbid", lambda self, name: None)
            setattr(cls, "__torch_function__", lambda self, f, t, a=(), k=None: f(*a, **(k or {})))


def scaled_dot_product_attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
