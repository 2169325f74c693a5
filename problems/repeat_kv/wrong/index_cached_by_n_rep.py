# expect: runtime_error
# mistake: keeps the gather index of head j // n_rep keyed by n_rep alone; the next input with another number of KV heads gets an index for the wrong head count
import torch

_index = {}


def repeat_kv(x, n_rep):
    B, S, H_kv, D = x.shape
    if n_rep not in _index:
        _index[n_rep] = torch.arange(H_kv * n_rep, device=x.device) // n_rep
    return x[:, :, _index[n_rep]]
