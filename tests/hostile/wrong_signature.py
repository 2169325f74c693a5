# expect: bad_interface
def scaled_dot_product_attention(q, k, v):
    return q
