# expect: runtime_error
# needs: confinement
# Lowers the resource limits of the trusted process (the zygote's parent) and of the zygote with prlimit,
# which needs no signal and no ptrace, only the same user: a CPU-time limit of 1 s, long spent by the grader
# that imported torch, kills it with SIGXCPU (a grader with no files left to open, or no room to write its
# store, would lose the record instead). The sandbox lets a worker set no other process's limits: a
# PermissionError, a runtime error, and the check ends normally.
import resource

import os

zygote = os.getppid()
with open(f"/proc/{zygote}/stat") as f:
    grader = int(f.read().rsplit(")", 1)[1].split()[1])
for pid in (grader, zygote):
    hard = resource.prlimit(pid, resource.RLIMIT_CPU)[1]
    resource.prlimit(pid, resource.RLIMIT_CPU, (1, hard))


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Q
