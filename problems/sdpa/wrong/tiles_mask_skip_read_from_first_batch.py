# expect: wrong_answer
# mistake: online softmax over key tiles of 128 that skips a key tile as 'all masked' when the FIRST batch element's mask has no True in it: with per-sequence key padding where sequence 0 is the short one, longer sequences lose their real keys in that tile
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
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        l = alpha * l + p.sum(-1, keepdim=True)
        acc = alpha * acc + p @ v[..., ks:ke, :].float()
        m = m_new
    return (acc / l).to(q.dtype)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = 1.0 / math.sqrt(Q.shape[-1])
    allow = skip = None
    if mask is not None:
        full = mask.expand(Q.shape[:-1] + (K.shape[-2],))
        allow = lambda ks, ke: full[..., ks:ke]
        first = full.reshape(-1, *full.shape[-2:])[0]  # first batch element (all its query rows)
        skip = lambda ks, ke: not bool(first[:, ks:ke].any())  # whole key tile is padding
    return _tiled(Q, K, V, scale, allow, skip=skip)
