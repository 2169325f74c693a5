# expect: wrong_answer
# mistake: concatenates copies of all heads, which tiles them
import torch


def repeat_kv(x, n_rep):
    return torch.cat([x] * n_rep, dim=2)
