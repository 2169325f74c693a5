# expect: runtime_error
# An exception whose message carries terminal control sequences and rich markup, raised from a
# line whose source holds a raw ESC byte (shown in the traceback): all of it is shown inertly.


def scaled_dot_product_attention(Q, K, V, mask=None):
    raise ValueError("\x1b[2J\x1b[H\x1b[32mAccepted\x1b[0m [bold green]Accepted[/bold green]")  # [2J]0;pwned
