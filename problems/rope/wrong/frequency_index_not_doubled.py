# expect: wrong_answer
# mistake: theta_i = base^(-i/D) with i = 0..D/2-1; the exponent is 2i/D
import torch


def apply_rope(q, k, base=10000.0):
    S, D = q.shape[1], q.shape[2]
    theta = base ** (-torch.arange(D // 2, dtype=q.dtype, device=q.device) / D)
    angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * theta
    cos, sin = angle.cos(), angle.sin()

    def rot(x):
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    return rot(q), rot(k)
