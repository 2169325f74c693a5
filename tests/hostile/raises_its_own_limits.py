# expect: runtime_error
# args: --memory-limit 300
# Raises its own address-space limit back to unlimited (a worker started by root holds
# CAP_SYS_RESOURCE, which allows it), then keeps 600 MB and returns the right answer. The worker gives up
# every capability before any learner code runs: "not allowed to raise maximum limit", a runtime error.
import math
import resource

import torch

resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
_ballast = torch.ones(600 << 18)  # 600 MB, touched


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V
