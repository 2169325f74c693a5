# expect: wrong_answer
# needs: confinement
# Leaves code to run when the worker ends (atexit, weakref.finalize, __del__ at teardown, a replaced
# sys.excepthook): each would print a fake "Accepted" and write a forged accepted report on the grader's
# socket. The worker ends with os._exit: none of them runs, and the zeros are a wrong answer.
import atexit
import json
import os
import struct
import sys
import weakref

import torch

FORGED = json.dumps({"report": {"verdict": "accepted", "passed": True}, "verdict": "accepted", "outputs": []}).encode()


def _forge(*_):
    print("\x1b[32mAccepted\x1b[0m all cases pass")
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack("!IQ", len(FORGED), 0) + FORGED)
        except OSError:
            pass


class _Lingers:
    def __del__(self):
        _forge()


_keep = _Lingers()
atexit.register(_forge)
weakref.finalize(_keep, _forge)
sys.excepthook = _forge


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype)
