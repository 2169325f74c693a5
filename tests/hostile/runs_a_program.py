# expect: runtime_error
# needs: confinement
import subprocess


def scaled_dot_product_attention(Q, K, V, mask=None):
    subprocess.run(["cat", "/etc/passwd"])
    return Q
