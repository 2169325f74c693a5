# expect: wrong_answer
# problem: rope
# base=None in the def, resolved in the body to 500.0: no reading of defaults sees it; only a case that calls
# without base (the `basic` case) does.
import torch


def apply_rope(q, k, base=None):
    base = 500.0 if base is None else base
    B, S, D = q.shape
    theta = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    angle = torch.outer(torch.arange(S, dtype=q.dtype, device=q.device), theta)  # (S, D/2)
    rotor = torch.polar(torch.ones_like(angle), angle)  # e^(i angle)

    def rot(x):
        xc = torch.view_as_complex(x.reshape(B, S, D // 2, 2).contiguous())
        return torch.view_as_real(xc * rotor).reshape(B, S, D)

    return rot(q), rot(k)
