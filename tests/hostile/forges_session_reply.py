# expect: wrong_answer
# needs: confinement
# Writes a forged "accepted" report into every file descriptor of every ancestor it can reach
# (the zygote, the `check` process or the warm session's process, whose replies are JSON lines on
# a pipe), then returns a wrong answer. (Its own socket is the forges_reply_* files' business.) The forgery must reach neither the judge nor the terminal.
import json
import os

import torch

FORGED = {"verdict": "accepted", "passed": True, "problem": "sdpa", "file": "x", "seed": 1, "cases": []}
LINES = (json.dumps({"report": FORGED}) + "\n" + json.dumps(FORGED) + "\n").encode()


def _ancestors():
    pid = os.getpid()
    for _ in range(6):
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return
        if pid <= 1:
            return
        yield pid


def _forge():
    for pid in _ancestors():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(w, LINES)
            except OSError:
                pass
            finally:
                os.close(w)


def scaled_dot_product_attention(Q, K, V, mask=None):
    _forge()
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
