"""Reference: repeat each KV head n_rep times in a row."""


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    B, S, H_kv, D = x.shape
    x = x[:, :, :, None, :]  # (B, S, H_kv, 1, D)
    x = x.expand(B, S, H_kv, n_rep, D)  # (B, S, H_kv, n_rep, D), no copy yet
    return x.reshape(B, S, H_kv * n_rep, D)  # (B, S, H_kv * n_rep, D): head j <- j // n_rep
