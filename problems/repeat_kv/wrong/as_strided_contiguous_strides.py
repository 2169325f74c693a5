# expect: wrong_answer
# mistake: a zero-copy repeat with torch.as_strided whose strides assume a contiguous x: right for
# contiguous inputs, garbage (or NaN) for a transposed or sliced one
import torch


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    B, S, H, D = x.shape
    rep = x.as_strided((B, S, H, n_rep, D), (S * H * D, H * D, D, 0, 1), x.storage_offset())
    return rep.reshape(B, S, H * n_rep, D)
