# expect: wrong_answer
# mistake: queries attended in chunks of 16 with S // 16 + (S % 16 > 1) chunks: when Sq % 16 == 1 (Sq > 1) the last query row stays zero
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


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        Q, K, V = x_q, x_kv, x_kv
        B, Sq, _ = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.d_k).transpose(1, 2)
        o = _attend(q, k, v, 1 / math.sqrt(self.d_k))
        return self.W_o(o.transpose(1, 2).reshape(B, Sq, -1))
