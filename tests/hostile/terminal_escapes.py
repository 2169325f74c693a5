# expect: wrong_answer
# Prints what would take over a terminal if replayed raw: clear screen and cursor home, then a
# fake green "Accepted" header, a window title (OSC), an 8-bit CSI, a carriage return that
# overwrites the line, a bell, a right-to-left override, and rich markup. The report shows all of
# it inertly (escaped) and the zeros are still a wrong answer.
import sys

import torch

FAKE = ("\x1b[2J\x1b[H\x1b[1;32mAccepted\x1b[0m  sdpa  sdpa.py  7/7 cases\n"
        "\x1b]0;pwned\x07\x9b2J\rAccepted \u202eAccepted [bold green]Accepted[/bold green] [link=http://x]y[/link]\n")
print(FAKE, end="")


def scaled_dot_product_attention(Q, K, V, mask=None):
    print(FAKE, end="")
    sys.stderr.write(FAKE)
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, requires_grad=True)
