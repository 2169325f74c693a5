# expect: runtime_error
# problem: sdpa
# mask is keyword-only (a caller's scaled_dot_product_attention(Q, K, V, mask) raises), behind an assigned
# __signature__ that shows the contract's (Q, K, V, mask=None): a signature check reads the lie. The grader
# also passes the optional parameters by position, in about half the cases and in the others' replays.
import inspect
import math

import torch


def _contract(Q, K, V, mask=None):
    pass


def scaled_dot_product_attention(Q, K, V, *, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V


scaled_dot_product_attention.__signature__ = inspect.signature(_contract)
