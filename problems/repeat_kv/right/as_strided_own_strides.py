# expect: accepted
# alternative: a zero-copy repeat with torch.as_strided built from x's own strides (a stride-0 copy axis),
# then reshape: right for any memory layout
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    sb, ss, sh, sd = x.stride()
    rep = x.as_strided((B, S, H, n_rep, D), (sb, ss, sh, 0, sd), x.storage_offset())
    return rep.reshape(B, S, H * n_rep, D)
