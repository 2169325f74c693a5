# expect: runtime_error
# mistake: writes the rotated pairs back into q and k in place (q[..., 0::2] = ...): never modify the caller's tensors
import torch


def apply_rope(q, k, base=10000.0):
    S, D = q.shape[1], q.shape[2]
    theta = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    for x in (q, k):
        x1, x2 = x[..., 0::2].clone(), x[..., 1::2].clone()
        x[..., 0::2] = x1 * cos - x2 * sin
        x[..., 1::2] = x1 * sin + x2 * cos
    return q, k
