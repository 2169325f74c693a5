# expect: runtime_error
# needs: confinement
# Evades the source scan with a computed module name, then asks the grader for the reference kernel.
import importlib

catalog = importlib.import_module("torch" + "code.catalog")
judge = importlib.import_module("torch" + "code.grader.judge")
_reference = judge.Problem(catalog.load_catalog().get("sdpa")).reference


def scaled_dot_product_attention(Q, K, V, mask=None):
    return _reference(Q, K, V, mask)
