# expect: crashed
import os


def scaled_dot_product_attention(Q, K, V, mask=None):
    os._exit(0)
