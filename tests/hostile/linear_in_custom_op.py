# expect: forbidden_call
# problem: linear_attention
# args: --time-limit 5
# The quadratic form of linear attention (phi(Q) phi(K)^T, S x S) inside a custom operator of the file's
# own (torch.library.custom_op) whose CPU kernel is Python: the grader's dispatch mode sees the custom op
# once, then runs its kernel with the mode off the stack, so the S x S table and its S^2 work went unseen.
# The gradient is registered with the op (the quadratic form in torch).
import torch
import torch.nn.functional as F


def _quadratic(Q, K, V, eps):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    w = q @ k.transpose(-2, -1)
    return (w @ V) / (w.sum(-1, keepdim=True) + eps)


@torch.library.custom_op("learner::linear_attention", mutates_args=())
def _op(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, eps: float) -> torch.Tensor:
    return _quadratic(Q, K, V, eps)


@_op.register_fake
def _(Q, K, V, eps):
    return Q.new_empty(*Q.shape[:-1], V.shape[-1])


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3])
    ctx.eps = inputs[3]


def _backward(ctx, g):
    with torch.enable_grad():
        q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
        return (*torch.autograd.grad(_quadratic(q, k, v, ctx.eps), (q, k, v), g), None)


_op.register_autograd(_backward, setup_context=_setup)


def linear_attention(Q, K, V, eps=1e-6):
    return _op(Q, K, V, eps)
