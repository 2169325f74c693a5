# expect: wrong_output
def scaled_dot_product_attention(Q, K, V, mask=None):
    return None
