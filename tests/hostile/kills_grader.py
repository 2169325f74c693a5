# expect: runtime_error
# needs: confinement
# SIGKILLs the trusted process (the zygote's parent) and the zygote: refused, the check ends normally.
import os
import signal

zygote = os.getppid()
with open(f"/proc/{zygote}/stat") as f:
    grader = int(f.read().rsplit(")", 1)[1].split()[1])
for pid in (grader, zygote):
    os.kill(pid, signal.SIGKILL)


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Q
