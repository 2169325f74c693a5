"""torchcode: practice PyTorch attention kernels against an isolated, differential grader.

The core is importable without the CLI:

    from torchcode.catalog import load_catalog
    from torchcode.grader import grade_file

Nothing here imports torch until something is graded.
"""

__version__ = "0.1.0"


def load_ipython_extension(ipython):
    """``%load_ext torchcode`` in Jupyter or IPython: the ``%torchcode`` magics (see torchcode.jupyter)."""
    from torchcode import jupyter

    jupyter.load(ipython)


def unload_ipython_extension(ipython):
    from torchcode import jupyter

    jupyter.unload(ipython)
