# expect: wrong_answer
# mistake: rotates each pair in polar form (radius = hypot, angle = atan2 + m*theta, in float64): the forward is right but the gradient is NaN for a pair that is exactly (0, 0)
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    inv = 1.0 / (base ** (torch.arange(0, D, 2, device=q.device, dtype=torch.float64) / D))
    ang = torch.arange(S, device=q.device, dtype=torch.float64)[:, None] * inv[None, :]

    def rot(x):
        xf = x.double()
        a, b = xf[..., 0::2], xf[..., 1::2]
        r = torch.hypot(a, b)
        phi = torch.atan2(b, a) + ang
        return torch.stack([r * torch.cos(phi), r * torch.sin(phi)], dim=-1).flatten(-2).to(x.dtype)

    return rot(q), rot(k)
