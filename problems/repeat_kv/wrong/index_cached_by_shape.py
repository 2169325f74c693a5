# expect: wrong_output
# mistake: the gather index (0, 0, 1, 1, ...) is cached by x's shape, built with the first call's n_rep: another n_rep on the same shape reuses it
import torch

_INDEX = {}


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    key = (tuple(x.shape), x.device)
    if key not in _INDEX:
        H = x.shape[2]
        _INDEX[key] = torch.arange(H * n_rep, device=x.device) // n_rep
    return x.index_select(2, _INDEX[key])
