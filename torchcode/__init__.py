"""torchcode: practice PyTorch attention kernels against an isolated, differential grader.

The core is importable without the CLI:

    from torchcode.catalog import load_catalog
    from torchcode.grader import grade_file

Nothing here imports torch until something is graded.
"""

__version__ = "0.1.0"
