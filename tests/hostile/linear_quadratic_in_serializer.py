# expect: forbidden_call
# problem: linear_attention
# the call returns a marker-filled placeholder (custom autograd Function, naive gradient in backward); the
# real answer is computed QUADRATICALLY (phi(Q) phi(K)^T, B x S x S) inside a replaced torch.Tensor.contiguous that
# the worker's reply encoder calls after the guard has exited. Replacing torch's own Tensor methods is a forbidden call.
import torch
import torch.nn.functional as F

_orig_contiguous = torch.Tensor.contiguous
_pending = {}
_counter = [0]


def _quadratic(Q, K, V, eps):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    A = q @ k.transpose(-2, -1)  # B x S x S
    return (A @ V) / (A.sum(-1, keepdim=True) + eps)


class _Placeholder(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, eps):
        ctx.save_for_backward(Q, K, V)
        ctx.eps = eps
        _counter[0] += 1
        marker = 7.0e5 + _counter[0]
        _pending[marker] = (Q.detach().clone(), K.detach().clone(), V.detach().clone(), eps)
        return torch.full((Q.shape[0], Q.shape[1], V.shape[-1]), marker, dtype=Q.dtype, device=Q.device)

    @staticmethod
    def backward(ctx, dO):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_(True) for t in (Q, K, V))
            gq, gk, gv = torch.autograd.grad(_quadratic(q, k, v, ctx.eps), (q, k, v), dO)
        return gq, gk, gv, None


def _patched(self, *a, **kw):
    try:
        if self.dim() == 3 and self.numel() > 0 and not self.requires_grad:
            first = float(_orig_contiguous(self).reshape(-1)[0])
            if first in _pending:
                Q, K, V, eps = _pending[first]
                with torch.no_grad():
                    return _orig_contiguous(_quadratic(Q, K, V, eps).to(self.dtype))
    except BaseException:
        pass
    return _orig_contiguous(self, *a, **kw)


torch.Tensor.contiguous = _patched


def linear_attention(Q, K, V, eps=1e-6):
    return _Placeholder.apply(Q, K, V, eps)
