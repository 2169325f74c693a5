"""One module per command; each exposes ``run(...)`` returning an exit code.

``torchcode.cli`` only parses arguments and calls these. Only ``check`` imports torch.
"""
