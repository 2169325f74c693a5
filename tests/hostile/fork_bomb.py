# expect: runtime_error
# needs: confinement
# A fork bomb: fork is refused inside the sandbox, so it fails at the first fork.
import os


def scaled_dot_product_attention(Q, K, V, mask=None):
    while True:
        os.fork()
