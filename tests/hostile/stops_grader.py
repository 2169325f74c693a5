# expect: runtime_error
# needs: confinement
# SIGSTOPs the trusted process and the zygote, so that no deadline could fire: refused.
import os
import signal


def scaled_dot_product_attention(Q, K, V, mask=None):
    zygote = os.getppid()
    with open(f"/proc/{zygote}/stat") as f:
        grader = int(f.read().rsplit(")", 1)[1].split()[1])
    for pid in (grader, zygote):
        os.kill(pid, signal.SIGSTOP)
    return Q
