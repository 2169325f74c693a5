# expect: accepted
# Leaves a busy thread spinning after returning a correct answer: the worker is still ended.
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


def scaled_dot_product_attention(Q, K, V, mask=None):
    threading.Thread(target=_spin, daemon=True).start()
    return _attention(Q, K, V, mask)
