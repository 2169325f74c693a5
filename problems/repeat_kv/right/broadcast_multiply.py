# expect: accepted
# alternative: broadcasting against a ones tensor (x[..., None, :] * ones) instead of expand
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    ones = torch.ones(1, 1, 1, n_rep, 1, dtype=x.dtype, device=x.device)
    return (x.unsqueeze(3) * ones).flatten(2, 3)
