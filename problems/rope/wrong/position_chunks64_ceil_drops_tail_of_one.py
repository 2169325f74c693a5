# expect: wrong_answer
# mistake: positions rotated 64 at a time (to keep the cos/sin tables small) with S // 64 + (S % 64 > 1) chunks (the ceil should test > 0): when S % 64 == 1 (S > 1) the last position is never rotated and comes back as zeros
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    C = 64
    theta = base ** (-torch.arange(0, D, 2, dtype=q.dtype, device=q.device) / D)
    q_out, k_out = torch.zeros_like(q), torch.zeros_like(k)
    for c in range(max(S // C + (1 if S % C > 1 else 0), 1)):
        m = torch.arange(c * C, min((c + 1) * C, S), dtype=q.dtype, device=q.device)
        angle = m[:, None] * theta[None, :]
        cos, sin = angle.cos(), angle.sin()
        for x, out in ((q, q_out), (k, k_out)):
            x1, x2 = x[:, c * C:(c + 1) * C, 0::2], x[:, c * C:(c + 1) * C, 1::2]
            out[:, c * C:(c + 1) * C] = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    return q_out, k_out
