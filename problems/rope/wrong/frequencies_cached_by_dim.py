# expect: wrong_answer
# mistake: memoises the inverse frequencies per head width D only: the first base seen for a D sticks
import torch

_INV_FREQ = {}


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    if D not in _INV_FREQ:
        _INV_FREQ[D] = 1.0 / base ** (torch.arange(0, D, 2, device=q.device).float() / D)
    angle = torch.arange(S, dtype=q.dtype, device=q.device)[:, None] * _INV_FREQ[D].to(q.dtype)
    cos, sin = angle.cos(), angle.sin()
    q1, q2, k1, k2 = q[..., ::2], q[..., 1::2], k[..., ::2], k[..., 1::2]
    q_out = torch.stack([q1 * cos - q2 * sin, q1 * sin + q2 * cos], -1).flatten(-2)
    k_out = torch.stack([k1 * cos - k2 * sin, k1 * sin + k2 * cos], -1).flatten(-2)
    return q_out, k_out
