# expect: time_limit
# A profile hook (sys.setprofile sees every C call the worker makes) that, once the first case's reply is
# on its way, stalls forever just before the worker reads its next case: the answers are right, but the
# worker never takes the next case. The judge's deadline ends it (no hang, no verdict from a stale reply).
import math
import sys
import time


def _hook(frame, event, arg):
    if event == "c_call" and getattr(arg, "__name__", "") in ("recv_into", "recv"):
        sys.setprofile(None)
        while True:
            time.sleep(1)


def scaled_dot_product_attention(Q, K, V, mask=None):
    import torch

    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    sys.setprofile(_hook)
    return torch.softmax(s, -1) @ V
