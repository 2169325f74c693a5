# expect: wrong_answer
# mistake: queries in chunks of 16 with a hand-written ceil Lq // 16 + (Lq % 16 > 1) (should be > 0): when Lq % 16 == 1 the last query row is never computed (zeros)
import math
import torch

def scaled_dot_product_attention(Q, K, V, mask=None):
    Lq = Q.shape[-2]
    C = 16
    out = Q.new_zeros(*torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2]), Lq, V.shape[-1])
    for c in range(max(Lq // C + (1 if Lq % C > 1 else 0), 1)):
        sl = slice(c * C, (c + 1) * C)
        s = Q[..., sl, :] @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if mask is not None:
            m = mask if mask.dim() == 1 or mask.shape[-2] == 1 else mask[..., sl, :]
            s = s.masked_fill(~m, float('-inf'))
        out[..., sl, :] = torch.softmax(s.float(), -1).to(Q.dtype) @ V
    return out
