# expect: accepted
# alternative: explicit 2x2 rotation matrices per (position, pair), applied with einsum
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    inv_freq = torch.pow(base, -torch.arange(0, D, 2, device=q.device, dtype=q.dtype) / D)
    ang = torch.einsum("s,f->sf", torch.arange(S, device=q.device, dtype=q.dtype), inv_freq)
    c, s = ang.cos(), ang.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (S, D/2, 2, 2)

    def rot(x):
        pairs = x.reshape(B, S, D // 2, 2)
        return torch.einsum("sfij,bsfj->bsfi", R, pairs).reshape(B, S, D)

    return rot(q), rot(k)
