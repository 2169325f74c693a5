# expect: wrong_answer
# mistake: builds the frequencies from int(base) ("the base is a whole number like 10000"): a fractional base such
# as 2.5 is truncated to 2
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    b = int(base)
    inv = 1.0 / (b ** (torch.arange(0, D, 2, device=q.device, dtype=torch.float32) / D))
    ang = torch.arange(S, device=q.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(q.dtype), ang.sin().to(q.dtype)

    def rot(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    return rot(q), rot(k)
