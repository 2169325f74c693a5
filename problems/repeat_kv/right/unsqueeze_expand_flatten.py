# expect: accepted
# alternative: a new axis after the heads, expand with -1 for the kept sizes, flatten(2, 3) merges it with the heads
def repeat_kv(x, n_rep):
    return x.unsqueeze(3).expand(-1, -1, -1, n_rep, -1).flatten(2, 3)
