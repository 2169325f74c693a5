# expect: wrong_output
# an output tuple whose __iter__ raises on its second pass (the grader's own reads after the call): read once, as a
# plain tuple, never a dead worker blamed on the machine
import torch


class Sly(tuple):
    n = 0

    def __iter__(self):
        Sly.n += 1
        if Sly.n >= 2:
            raise ValueError("late")
        return super().__iter__()


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return Sly((torch.softmax(s, -1) @ V,))
