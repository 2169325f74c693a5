# expect: time_limit
import time


def scaled_dot_product_attention(Q, K, V, mask=None):
    time.sleep(1e9)
