# expect: wrong_answer
# mistake: an online softmax over the (cached + new) keys in tiles of 64 whose tile count is L // 64 + (L % 64 > 1) (the ceil should test > 0): when L % 64 == 1 (L > 1) the last key, the newest token's own, is never visited
import math
import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        if cache is not None:
            k = torch.cat([cache[0], k], 2)
            v = torch.cat([cache[1], v], 2)
        L = k.shape[2]
        rows = torch.arange(L - T, L, device=x.device)[:, None]  # absolute positions of the new tokens
        qf = q.float() / math.sqrt(self.d_k)
        m = torch.full((B, self.h, T, 1), float('-inf'), device=x.device)
        l = torch.zeros(B, self.h, T, 1, device=x.device)
        acc = torch.zeros(B, self.h, T, self.d_k, device=x.device)
        tile = 64
        for t in range(max(L // tile + (1 if L % tile > 1 else 0), 1)):
            j = t * tile
            kt, vt = k[:, :, j:j + tile].float(), v[:, :, j:j + tile].float()
            s = qf @ kt.transpose(-2, -1)
            cols = torch.arange(j, j + kt.shape[2], device=x.device)[None, :]
            s = s.masked_fill(cols > rows, float('-inf'))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe)
            a = torch.exp(m - safe)
            l = a * l + p.sum(-1, keepdim=True)
            acc = a * acc + p @ vt
            m = m_new
        o = (acc / l).to(x.dtype)
        return self.W_o(o.transpose(1, 2).reshape(B, T, C)), (k, v)
