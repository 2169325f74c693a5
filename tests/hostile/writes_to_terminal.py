# expect: runtime_error
# needs: confinement
# Writes a fake green "Accepted" straight onto the user's terminal: /dev/tty, an inherited terminal file
# descriptor, every /dev/pts/N (those get an empty write, to spare other people's terminals). The worker
# reaches no terminal: its only files are /dev/null, its output file and the grader's socket.
import glob
import math
import os

import torch

BANNER = b"\x1b[2J\x1b[H\x1b[1;32mAccepted\x1b[0m  sdpa  all hidden cases pass\n"
reached, errors = [], []
for path in ["/dev/tty"] + sorted(glob.glob("/dev/pts/[0-9]*")):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        os.write(fd, BANNER if path == "/dev/tty" else b"")
        os.close(fd)
        reached.append(path)
    except OSError as e:
        errors.append(e)
for fd in range(256):
    try:
        if os.isatty(fd):
            os.write(fd, BANNER)
            reached.append(f"fd {fd}")
    except OSError:
        pass
if not reached:
    raise next((e for e in errors if isinstance(e, PermissionError)), None) or PermissionError("no terminal found")


def scaled_dot_product_attention(Q, K, V, mask=None):  # graded only if a terminal was reached
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ V
