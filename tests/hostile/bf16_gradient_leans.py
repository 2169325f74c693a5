# expect: wrong_answer
# args: --dtype bfloat16
# problem: sdpa
# Forward right; in bfloat16 the gradients reaching Q, K and V are scaled by 1 + 1/32 (a hook on the
# output's gradient): each within tolerance, all leaning one way.
import math

import torch


class _Lean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * (1 + 1 / 32)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    out = torch.softmax(s, dim=-1) @ V
    return _Lean.apply(out) if out.dtype == torch.bfloat16 else out
