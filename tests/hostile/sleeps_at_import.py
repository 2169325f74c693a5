# expect: time_limit
# args: --total-time-limit 3
# Sleeps at import until the limit: the check ends with a verdict and leaves no temporary directory.
import time

time.sleep(600)


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Q
