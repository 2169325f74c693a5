# expect: accepted
# alternative: an online softmax that rescales only when some row's max moved (if (m_new > m).any(), once per tile pair:
#   a truth value per tile, 256 and more of them in the small-tile cases, once refused as data leaving torch, wrong28)
import math
import torch


def _tiled(q, k, v, scale, T, allow=None, kstart=0, kend=None, skip=None):
    Lk = k.shape[-2] if kend is None else kend
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=torch.float32, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=torch.float32, device=q.device)
    for ks in range(kstart, Lk, T):
        ke = min(ks + T, Lk)
        if skip is not None and skip(ks, ke):
            continue
        s = (q @ k[..., ks:ke, :].transpose(-2, -1)).float() * scale
        if allow is not None:
            s = s.masked_fill(~allow(ks, ke), float("-inf"))
        tile_max = s.amax(-1, keepdim=True)
        m_new = torch.maximum(m, tile_max)
        if (m_new > m).any():  # rescale only when some max moved (alpha = 1 elsewhere)
            alpha = torch.exp(m - m_new)
            l = alpha * l
            acc = alpha * acc
            m = m_new
        p = torch.exp(s - m)
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., ks:ke, :].float()
    return (acc / l).to(q.dtype)


def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    outs = []
    for qs in range(0, S, block_size):
        outs.append(_tiled(Q[:, qs:qs + block_size], K, V, scale, block_size))
    return torch.cat(outs, dim=1)
