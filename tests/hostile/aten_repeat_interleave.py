# expect: forbidden_call
# problem: repeat_kv
# The forbidden repeat_interleave through its aten overload (a composite op: no dispatch mode sees it).
import torch


def repeat_kv(x, n_rep):
    return torch.ops.aten.repeat_interleave.self_int(x, n_rep, 1)
