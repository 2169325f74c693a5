# expect: too_much_memory
# problem: flash_attention
# args: --time-limit 5
# The full B x S x S score matrix, written with out= and in-place ops into a buffer allocated when the file
# is loaded (no memory bound there). The largest-intermediate guard counted only fresh storages (an op's
# result that shares an input's storage is a view or an in-place write): a buffer made before the call
# was never seen. Each reduction takes half of the keys (under the bound on the widest reduction); the
# gradient is the naive one, in a custom autograd Function.
import math

import torch

_SCRATCH = torch.empty(1 << 22)


def _naive(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), -1) @ V


class _Kept(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        B, S, D = Q.shape
        s = _SCRATCH[: B * S * S].view(B, S, S)
        torch.matmul(Q, K.transpose(-2, -1), out=s)  # every score at once
        s.mul_(1 / math.sqrt(D))
        h = max(S // 2, 1)
        halves = [s[..., :h], s[..., h:]] if S > 1 else [s]
        m = halves[0].amax(-1, keepdim=True)
        for x in halves[1:]:
            m = torch.maximum(m, x.amax(-1, keepdim=True))
        s.sub_(m).exp_()
        z = sum(x.sum(-1, keepdim=True) for x in halves)
        o = sum(x @ v for x, v in zip(halves, (V[:, :h], V[:, h:])))
        return o / z

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
            return torch.autograd.grad(_naive(q, k, v), (q, k, v), g)


def flash_attention(Q, K, V, block_size=32):
    return _Kept.apply(Q, K, V)
