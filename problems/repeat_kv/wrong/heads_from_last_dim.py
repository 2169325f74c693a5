# expect: wrong_answer
# mistake: repeats along the last dim (the head_dim) instead of the head axis and reshapes back: the values of
# head h are spread over several heads, each repeated inside one head's features
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    return x[..., None].expand(B, S, H, D, n_rep).reshape(B, S, H * n_rep, D)
