# expect: bad_interface
def attention(Q, K, V, mask=None):
    return Q
