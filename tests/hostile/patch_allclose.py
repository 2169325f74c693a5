# expect: forbidden_call
# Patches every comparison helper in its own process (torch.Tensor.__eq__ among them: replacing torch's own Tensor
# methods is a forbidden call) and returns zeros.
import builtins

import torch
import torch.testing

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: True
builtins.abs = lambda x: 0


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype)
