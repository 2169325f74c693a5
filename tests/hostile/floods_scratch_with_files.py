# expect: memory_limit
# args: --time-limit 20
# A million empty files in its scratch directory (no bytes, so no size limit applies): inodes, and time
# for whoever walks or removes the folder. The judge stops the worker past 2000 files.
import os


def scaled_dot_product_attention(Q, K, V, mask=None):
    for i in range(1_000_000):
        os.close(os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
    return Q
