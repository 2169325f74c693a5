# expect: wrong_answer
# The forward is right but nothing is differentiable (every input is detached): no gradient reaches Q, K
# or V. To hide that, each input's .grad is set by hand to a one-element tensor (`.data` swaps the
# shape): a gradient whose shape is not the input's is a wrong gradient, never one to skip.
import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    for t in (Q, K, V):
        if t.requires_grad:
            t.grad = torch.zeros_like(t)
            t.grad.data = torch.zeros(1, dtype=t.dtype)
    q, k, v = Q.detach(), K.detach(), V.detach()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ v
