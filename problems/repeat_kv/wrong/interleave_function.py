# expect: forbidden_call
# mistake: uses torch.repeat_interleave under an alias
from torch import repeat_interleave as rep


def repeat_kv(x, n_rep):
    return rep(x, n_rep, dim=2)
