# expect: wrong_answer
# Patches the comparison helpers of its own process (torch.allclose, torch.equal, assert_close, builtins.abs) and
# returns zeros: the verdict is computed in the trusted process, which none of that reaches. (patch_allclose also
# replaces torch.Tensor.__eq__, a forbidden call.)
import builtins

import torch
import torch.testing

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
builtins.abs = lambda x: 0


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype)
