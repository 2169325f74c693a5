# expect: runtime_error
# needs: confinement
# Makes a unix socket and connects to the sockets other programs of the same user listen on, by path (Landlock
# does not cover connecting to one): a desktop's D-Bus session bus (systemd's user manager starts any command
# there, outside the sandbox), the system bus, docker.sock (any container), X11 (keystrokes into the user's
# windows), ssh-agent. Reaching any of them, or just making the socket, is a way out; it then returns the right
# answer. The sandbox refuses every new socket but a stream socketpair: a PermissionError, a runtime error.
import glob
import math
import os
import socket

import torch

_uid = os.getuid()
_paths = [f"/run/user/{_uid}/bus", "/run/dbus/system_bus_socket", "/var/run/docker.sock", "/run/docker.sock",
          *glob.glob("/tmp/.X11-unix/X*"), os.environ.get("SSH_AUTH_SOCK") or ""]
_s = socket.socket(socket.AF_UNIX)  # refused by the sandbox
for _path in filter(None, _paths):
    try:
        _s.connect(_path)
        break
    except OSError:
        continue
_s.close()


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V
