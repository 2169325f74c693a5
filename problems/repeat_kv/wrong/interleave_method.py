# expect: forbidden_call
# mistake: uses Tensor.repeat_interleave, which this exercise forbids
def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)
