# expect: runtime_error
# Writes 100 MB to stdout: stopped at the output limit, and the grader's own output stays clean.
import sys

for _ in range(100):
    sys.stdout.write("y" * (1 << 20))
    sys.stdout.flush()


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Q
