# expect: runtime_error
import sys


def scaled_dot_product_attention(Q, K, V, mask=None):
    sys.exit(0)
