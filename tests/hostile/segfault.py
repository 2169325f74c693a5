# expect: crashed
import ctypes


def scaled_dot_product_attention(Q, K, V, mask=None):
    ctypes.string_at(0)
