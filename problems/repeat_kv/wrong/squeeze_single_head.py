# expect: runtime_error
# mistake: MQA shortcut: when H_kv == 1 squeezes all singleton dims and expands, dropping B == 1 or S == 1 dims
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    if n_rep == 1:
        return x
    if H == 1:
        y = x.squeeze()                       # (B, S, D) ... or fewer dims when B or S is 1
        return y.unsqueeze(-2).expand(*y.shape[:-1], n_rep, D).reshape(B, S, n_rep, D)
    return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)
