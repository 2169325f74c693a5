# expect: accepted
# alternative: n_rep == 1 returns x itself, one KV head returns a stride-0 expanded view (no copy), else expand + flatten
def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    B, S, H_kv, D = x.shape
    if H_kv == 1:
        return x.expand(B, S, n_rep, D)  # a view: every output head reads the same memory
    return x.unsqueeze(3).expand(-1, -1, -1, n_rep, -1).flatten(2, 3)
