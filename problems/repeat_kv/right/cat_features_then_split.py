# expect: accepted
# alternative: n_rep copies side by side in the feature dim, then one reshape splits them into grouped heads
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    return torch.cat([x] * n_rep, dim=-1).reshape(B, S, H * n_rep, D)
