# expect: forbidden_call
# problem: flash_attention
# same idea as flash_in_serializer.py, through another method the reply encoder calls after the guard:
# torch.Tensor.numpy (protocol.Message.tensor: ....view(torch.uint8).numpy().tobytes()). The call returns a
# marker-filled placeholder; the bytes sent back are the full S x S naive attention computed inside numpy().
import math
import torch

_orig_numpy = torch.Tensor.numpy
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
            gq, gk, gv = torch.autograd.grad(_naive(q, k, v), (q, k, v), dO)
        return gq, gk, gv


def _patched(self, *a, **kw):
    try:
        if self.dtype == torch.uint8 and self.dim() == 1 and self.numel() >= 4 and self.numel() % 4 == 0:
            first = float(self.view(torch.float32)[0])
            if first in _pending:
                Q, K, V = _pending[first]
                with torch.no_grad():
                    out = _naive(Q, K, V).contiguous().reshape(-1)
                return _orig_numpy(out.view(torch.uint8))
    except BaseException:
        pass
    return _orig_numpy(self, *a, **kw)


torch.Tensor.numpy = _patched


def flash_attention(Q, K, V, block_size=32):
    return _Placeholder.apply(Q, K, V)
