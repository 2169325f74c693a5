# expect: wrong_answer
# mistake: queries attended in chunks of 16 with S // 16 + (S % 16 > 1) chunks: when S % 16 == 1 (S > 1) the last query row stays zero
import math
import torch
from torch import nn

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


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.kvh, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, _ = x.shape
        n = self.h // self.kvh
        q = self.W_q(x).view(B, S, self.kvh, n, self.d_k).permute(0, 2, 3, 1, 4)  # (B, kvh, n, S, d)
        k = self.W_k(x).view(B, S, self.kvh, 1, self.d_k).permute(0, 2, 3, 1, 4)
        v = self.W_v(x).view(B, S, self.kvh, 1, self.d_k).permute(0, 2, 3, 1, 4)
        o = _attend(q, k, v, 1 / math.sqrt(self.d_k))  # (B, kvh, n, S, d)
        return self.W_o(o.permute(0, 3, 1, 2, 4).reshape(B, S, -1))
