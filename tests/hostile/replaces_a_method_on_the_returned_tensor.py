# expect: forbidden_call
# problem: flash_attention
# The call returns a placeholder (a custom autograd Function filled with a marker value, whose backward is naive
# attention's gradient) carrying its own `detach` (out.detach = ...): the worker's reply encoder called t.detach()
# after the guard had exited, and there the full S x S attention was computed, unmeasured. The encoder now calls
# torch's own functions, and a returned tensor that carries an attribute named as a Tensor method is refused.
import math
import torch

_orig_contiguous = torch.Tensor.contiguous
_pending = {}
_counter = [0]


def _naive(Q, K, V):
    s = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    return torch.softmax(s, dim=-1) @ V


class _Placeholder(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        _counter[0] += 1
        marker = 7.0e5 + _counter[0]
        _pending[marker] = (Q.detach().clone(), K.detach().clone(), V.detach().clone())
        return torch.full((Q.shape[0], Q.shape[1], V.shape[-1]), marker, dtype=Q.dtype, device=Q.device)

    @staticmethod
    def backward(ctx, dO):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_(True) for t in (Q, K, V))
            out = _naive(q, k, v)
            gq, gk, gv = torch.autograd.grad(out, (q, k, v), dO)
        return gq, gk, gv


def flash_attention(Q, K, V, block_size=32):
    out = _Placeholder.apply(Q, K, V)
    Qd, Kd, Vd = Q.detach().clone(), K.detach().clone(), V.detach().clone()

    def detach():  # an attribute of this one tensor: torch.Tensor's own methods stay as torch defines them
        with torch.no_grad():
            return _naive(Qd, Kd, Vd).to(out.dtype)

    out.detach = detach  # the worker's reply encoder calls out.detach() after the guard has exited
    return out
