# expect: forbidden_call
from torchcode.grader.judge import Problem  # noqa: F401


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Q
