# expect: wrong_answer
# mistake: bounds the score matrix by processing queries in chunks of 16 with range(S // 16) and a single-shot path for S <= 16: the last S % 16 queries of a longer sequence are never computed (left zero)
import math
import torch
from torch import nn

CHUNK = 16


class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.hk = num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, S, _ = x.shape
        n = self.h // self.hk
        q = self.W_q(x).view(B, S, self.hk, n, self.d_k).permute(0, 2, 3, 1, 4)  # (B, hk, n, S, d)
        k = self.W_k(x).view(B, S, self.hk, 1, self.d_k).permute(0, 2, 3, 1, 4)  # (B, hk, 1, S, d)
        v = self.W_v(x).view(B, S, self.hk, 1, self.d_k).permute(0, 2, 3, 1, 4)
        scale = 1.0 / math.sqrt(self.d_k)
        if S <= CHUNK:
            o = torch.softmax(q @ k.transpose(-1, -2) * scale, -1) @ v
        else:
            o = q.new_zeros(q.shape)
            for c in range(S // CHUNK):
                sl = slice(c * CHUNK, (c + 1) * CHUNK)
                o[..., sl, :] = torch.softmax(q[..., sl, :] @ k.transpose(-1, -2) * scale, -1) @ v
        o = o.permute(0, 3, 1, 2, 4).reshape(B, S, -1)
        return self.W_o(o)
