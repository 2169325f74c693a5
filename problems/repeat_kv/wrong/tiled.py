# expect: wrong_answer
# mistake: tiles the whole set of heads (0, 1, 0, 1) with Tensor.repeat
def repeat_kv(x, n_rep):
    return x.repeat(1, 1, n_rep, 1)
