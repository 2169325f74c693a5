# expect: wrong_answer
# mistake: a torch.autograd.Function whose backward returns the gradient of the first copy of each head
# instead of the sum over its n_rep copies
import torch


class _Repeat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n_rep):
        B, S, H, D = x.shape
        ctx.shape = (B, S, H, n_rep, D)
        return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)[:, :, :, 0], None


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    return _Repeat.apply(x, n_rep)
