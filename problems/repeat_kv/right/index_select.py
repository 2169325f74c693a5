# expect: accepted
# alternative: gather head j // n_rep with an index
import torch


def repeat_kv(x, n_rep):
    idx = torch.arange(x.shape[2] * n_rep, device=x.device) // n_rep
    return x[:, :, idx]
