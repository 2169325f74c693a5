# expect: forbidden_call
# needs: confinement
# Starts a busy thread before returning a correct answer: the sandbox refuses new threads (the
# guards watch one thread only), so starting one is a forbidden call.
import threading

def _attention(Q, K, V, mask=None):
    import math

    import torch

    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V


def _spin():
    while True:
        pass


_started = []


def scaled_dot_product_attention(Q, K, V, mask=None):
    if not _started:  # one busy thread, left running after the answer
        _started.append(threading.Thread(target=_spin, daemon=True))
        _started[0].start()
    return _attention(Q, K, V, mask)
