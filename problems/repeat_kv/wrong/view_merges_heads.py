# expect: runtime_error
# mistake: .view on the input: right for contiguous tensors only (a transposed or sliced x cannot be viewed); use .reshape
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    flat = x.view(B, S, H * D)
    return flat[:, :, None, :].expand(B, S, n_rep, H * D).reshape(B, S, n_rep * H, D)
