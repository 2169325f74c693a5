# expect: wrong_answer
# mistake: rotates the wrong way (sin sign flipped)
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    theta = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * theta
    cos, sin = angle.cos(), angle.sin()

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], -1).flatten(-2)

    return rot(q), rot(k)
