# expect: runtime_error
# needs: confinement
# Finds the installed reference solution next to the package and execs it.
import importlib.util
import os

pkg = os.path.dirname(importlib.util.find_spec("torch" + "code").origin)  # the grader hides sys.modules["torchcode"]
candidates = [os.path.join(pkg, "_builtin", "solutions", "sdpa.py"), os.path.join(pkg, "..", "solutions", "sdpa.py")]
src = next(open(p).read() for p in candidates if os.path.exists(p))
exec(src)
