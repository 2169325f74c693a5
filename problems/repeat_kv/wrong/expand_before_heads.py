# expect: wrong_answer
# mistake: inserts the new axis before the head axis, which tiles the heads
def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    return x[:, :, None].expand(B, S, n_rep, H, D).reshape(B, S, H * n_rep, D)
