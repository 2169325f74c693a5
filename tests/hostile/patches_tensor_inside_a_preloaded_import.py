# expect: wrong_answer
# problem: flash_attention
# An import hook of its own (sys.meta_path) that replaced torch.Tensor.contiguous when the worker preloaded
# torch._dynamo for a file naming torch.compile (in a comment): the worker noted torch.Tensor's methods after that
# preload, so the patch counted as torch's own. Preloads now run before any of the file's code: the hook never
# fires, the placeholder (a marker value) is what the encoder reads, and that is a wrong answer.
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


def _patched(self, *a, **kw):
    try:
        if self.dim() == 3 and self.numel() > 0 and not self.requires_grad:
            first = float(_orig_contiguous(self).reshape(-1)[0])
            if first in _pending:
                Q, K, V = _pending[first]
                with torch.no_grad():
                    return _orig_contiguous(_naive(Q, K, V).to(self.dtype))
    except BaseException:
        pass
    return _orig_contiguous(self, *a, **kw)


import sys


class _Finder:
    # the worker imports torch._dynamo after the file's import check and before it notes torch.Tensor's methods
    # again: a file that mentions torch.compile gets it imported, and this finder runs then
    def find_spec(self, name, path=None, target=None):
        if name == "torch._dynamo":
            torch.Tensor.contiguous = _patched
        return None


sys.meta_path.insert(0, _Finder())


def flash_attention(Q, K, V, block_size=32):
    return _Placeholder.apply(Q, K, V)  # torch.compile is never used
