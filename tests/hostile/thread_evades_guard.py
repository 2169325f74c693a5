# expect: forbidden_call
# needs: confinement
# Calls the fused kernel on another thread, where the torch modes of the grader's thread do not look.
# The sandbox refuses new threads, and the kernel itself refuses on every thread.
import threading

import torch.nn.functional as F


def scaled_dot_product_attention(Q, K, V, mask=None):
    out = []
    t = threading.Thread(target=lambda: out.append(F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)))
    t.start()
    t.join()
    return out[0]
