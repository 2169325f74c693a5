"""Reference: rotary position embedding, interleaved pairs."""

import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    two_i = torch.arange(0, D, 2, dtype=q.dtype, device=q.device)  # (D/2,): 0, 2, 4, ...
    theta = base ** (-two_i / D)  # (D/2,)
    m = torch.arange(S, dtype=q.dtype, device=q.device)  # (S,): positions from 0
    angle = m[:, None] * theta[None, :]  # (S, D/2)
    cos, sin = angle.cos(), angle.sin()

    def rotate(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, S, D/2) each: the pairs (2i, 2i+1)
        rotated = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (B, S, D/2, 2)
        return rotated.flatten(-2)  # (B, S, D), pairs interleaved again

    return rotate(q), rotate(k)
