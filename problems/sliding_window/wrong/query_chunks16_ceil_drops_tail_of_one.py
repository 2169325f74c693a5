# expect: wrong_answer
# mistake: queries in chunks of 16 with S // 16 + (S % 16 > 1) chunks: when S % 16 == 1 (S > 1) the last query row stays zero
import math
import torch

def _attend(q, k, v, scale, allowed=None, C=16):
    # q (..., S, d): queries C at a time, so no (S, S) score matrix at once
    S = q.shape[-2]
    out = q.new_zeros(*q.shape[:-1], v.shape[-1])
    for c in range(max(S // C + (1 if S % C > 1 else 0), 1)):
        sl = slice(c * C, (c + 1) * C)
        s = q[..., sl, :] @ k.transpose(-2, -1) * scale
        if allowed is not None:
            s = s.masked_fill(~allowed[..., sl, :], float('-inf'))
        out[..., sl, :] = torch.softmax(s.float(), -1).to(q.dtype) @ v
    return out


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    i = torch.arange(S, device=Q.device)
    allowed = (i[:, None] - i[None, :]).abs() <= window_size
    return _attend(Q, K, V, 1 / math.sqrt(Q.shape[-1]), allowed)
