# expect: wrong_answer
# mistake: flash-style GQA over key chunks of 32 with the grouped queries; when the running max grows it rescales the accumulated output but not the running sum l: exact only while S fits in one chunk
import math
import torch
from torch import nn

CHUNK = 32


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
        q = self.W_q(x).view(B, S, self.hk, n, self.d_k).permute(0, 2, 3, 1, 4) / math.sqrt(self.d_k)
        k = self.W_k(x).view(B, S, self.hk, 1, self.d_k).permute(0, 2, 3, 1, 4)
        v = self.W_v(x).view(B, S, self.hk, 1, self.d_k).permute(0, 2, 3, 1, 4)
        m = q.new_full((*q.shape[:-1], 1), float("-inf"))
        l = q.new_zeros(m.shape)
        acc = q.new_zeros(q.shape)
        for s in range(0, S, CHUNK):
            sc = q @ k[..., s:s + CHUNK, :].transpose(-1, -2)
            m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
            p = torch.exp(sc - m_new)
            acc = acc * torch.exp(m - m_new) + p @ v[..., s:s + CHUNK, :]
            l = l + p.sum(-1, keepdim=True)
            m = m_new
        o = (acc / l).permute(0, 3, 1, 2, 4).reshape(B, S, -1)
        return self.W_o(o)
