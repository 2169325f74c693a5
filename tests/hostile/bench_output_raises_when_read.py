# expect: accepted
# bench: correct at the graded sizes; at the benchmark's sizes it returns a tuple whose __iter__ raises on every pass
# but the first: `bench` reads it once, as `check` does, and refuses to time it, naming why (never a dead worker
# with an empty reason)
import torch


class Sly(tuple):
    def __iter__(self):
        raise ValueError("read twice")


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, -1) @ V
    return Sly((out,)) if Q.shape[-1] == 64 and Q.shape[-2] >= 200 else out  # the benchmark's inputs only
