# expect: runtime_error
# needs: confinement
# Reads the installed reference through the venv's `lib64 -> lib` symlink (`python -m venv` makes one),
# then runs it. Refused: a symlink never opens what the real path keeps out of reach.
import os
import sys

site = os.path.join(sys.prefix, "lib64", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
exec(open(os.path.join(site, "torch" + "code", "_builtin", "solutions", "sdpa.py")).read())
