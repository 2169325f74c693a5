"""`torchcode serve`: a browser workspace on the learner's own machine.

``workspace`` is the logic (no web framework: what the pages show and do, on the same files and
progress store as the CLI), ``security`` the guard every request passes (token, Host, Origin),
``app`` the Starlette routes. Only ``torchcode serve`` imports this package.
"""
