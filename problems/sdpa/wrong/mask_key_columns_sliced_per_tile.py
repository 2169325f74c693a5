# expect: runtime_error
# mistake: an online softmax over tiles of 64 keys slices the mask's key columns per tile, whatever the mask's
#   shape: a mask whose key dim is 1, (B, Lq, 1), broadcasts over the keys, and its slice is empty from the second tile on
import math
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    Lk, Dk = K.shape[-2], Q.shape[-1]
    q = Q / math.sqrt(Dk)
    m = l = acc = None
    for ks in range(0, Lk, 64):
        s = q @ K[..., ks:ks + 64, :].transpose(-2, -1)
        if mask is not None:
            s = s.masked_fill(~mask[..., ks:ks + 64], float("-inf"))
        tile_max = s.amax(-1, keepdim=True)
        m_new = tile_max if m is None else torch.maximum(m, tile_max)
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - safe)
        v = V[..., ks:ks + 64, :]
        if m is None:
            l, acc = p.sum(-1, keepdim=True), p @ v
        else:
            alpha = torch.exp(m - safe)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ v
        m = m_new
    return acc / l
