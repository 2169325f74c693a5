# expect: time_limit
# Blocks every signal it can, ignores the rest, and loops forever: only SIGKILL, which cannot be blocked,
# ends it; the judge uses it. A time limit, nothing left running.
import signal

for s in signal.valid_signals():
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass
signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())


def scaled_dot_product_attention(Q, K, V, mask=None):
    while True:
        pass
