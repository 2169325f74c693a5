# expect: wrong_answer
# mistake: results memoised per input tensor object (checked alive through a weak reference, so a new tensor that
# gets a freed one's id() is never mistaken for it), not per content: a static KV cache written in place every
# decoding step gets the old values repeated
import weakref

_memo = {}  # id(x) -> (weak reference to x, {n_rep: result})


def repeat_kv(x, n_rep):
    entry = _memo.get(id(x))
    if entry is None or entry[0]() is not x:
        entry = _memo[id(x)] = (weakref.ref(x), {})
    if n_rep not in entry[1]:
        b, s, h, d = x.shape
        entry[1][n_rep] = x[:, :, :, None, :].expand(b, s, h, n_rep, d).reshape(b, s, h * n_rep, d)
    return entry[1][n_rep]
