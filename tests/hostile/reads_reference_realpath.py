# expect: runtime_error
# needs: confinement
# Reads the installed reference at its real path in site-packages (a wheel, or an editable install's copy).
import os
import sys

site = os.path.join(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
exec(open(os.path.join(site, "torch" + "code", "_builtin", "solutions", "sdpa.py")).read())
