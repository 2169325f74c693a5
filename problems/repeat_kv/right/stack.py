# expect: accepted
# alternative: stack copies on a new axis after the heads
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    return torch.stack([x] * n_rep, dim=3).reshape(B, S, H * n_rep, D)
