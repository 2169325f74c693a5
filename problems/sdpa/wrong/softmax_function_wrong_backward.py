# expect: wrong_answer
# mistake: a hand-written softmax (torch.autograd.Function) whose backward returns y * g, dropping the
# - y * sum(g * y) term: the outputs are right, the gradients of Q and K are not
import math

import torch


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s):
        y = torch.softmax(s, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * g


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return _Softmax.apply(s) @ V
