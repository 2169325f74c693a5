# expect: time_limit
def scaled_dot_product_attention(Q, K, V, mask=None):
    while True:
        pass
