# expect: wrong_output
# mistake: assumes the (B, H, S, D) layout and repeats along dim 1
def repeat_kv(x, n_rep):
    B, H, S, D = x.shape
    return x[:, :, None].expand(B, H, n_rep, S, D).reshape(B, H * n_rep, S, D)
