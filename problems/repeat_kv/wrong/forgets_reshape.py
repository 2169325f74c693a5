# expect: wrong_output
# mistake: expands to (B, S, H_kv, n_rep, D) and returns it without merging the two head dims
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    return x[:, :, :, None, :].expand(B, S, H, n_rep, D)
