# expect: wrong_answer
# mistake: causal online softmax over key tiles of 128 that rescales only `if (m_new > m).all():`
import math
import torch


def _tiled(q, k, v, scale, allow=None, kstart=0, kend=None, skip=None):
    Lk = k.shape[-2] if kend is None else kend
    T = 128
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
        if (m_new > m).all():  # rescale only when the max moved
            alpha = torch.exp(m - m_new)
            l = alpha * l
            acc = alpha * acc
            m = m_new
        p = torch.exp(s - m)
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ v[..., ks:ke, :].float()
    return (acc / l).to(q.dtype)


def causal_attention(Q, K, V):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    outs = []
    for qs in range(0, S, 64):
        qe = min(qs + 64, S)
        rows = torch.arange(qs, qe, device=Q.device)[:, None]
        allow = lambda ks, ke: torch.arange(ks, ke, device=Q.device)[None, :] <= rows
        last = qe - 1  # keys after this row are in every row's future
        outs.append(_tiled(Q[:, qs:qe], K, V, scale, allow, kend=last + 1))
    return torch.cat(outs, dim=1)
