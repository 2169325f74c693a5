# expect: runtime_error
# mistake: torch.outer(theta, positions) gives (D/2, S), not (S, D/2): broadcasting fails, or, when S == D/2, silently swaps positions and frequencies
import torch


def apply_rope(q, k, base=10000.0):
    S, D = q.shape[1], q.shape[2]
    theta = 1.0 / base ** (torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    angle = torch.outer(theta, torch.arange(S, dtype=q.dtype, device=q.device))
    cos, sin = angle.cos(), angle.sin()

    def rot(x):
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    return rot(q), rot(k)
