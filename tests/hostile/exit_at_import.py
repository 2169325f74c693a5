# expect: runtime_error
import sys

sys.exit(0)
