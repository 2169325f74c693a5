# expect: wrong_answer
# mistake: gathers heads with index j % H_kv (tiled 0, 1, 0, 1) instead of j // n_rep (grouped 0, 0, 1, 1)
import torch


def repeat_kv(x, n_rep):
    H = x.shape[2]
    idx = torch.arange(H * n_rep, device=x.device) % H
    return x[:, :, idx]
