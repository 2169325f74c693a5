# expect: wrong_answer
# mistake: memory-efficient cross-attention over long encoder memories: online softmax over chunks of 64 memory tokens that rescales the running sum but forgets to rescale the accumulated output when the running max grows: exact only while the memory fits in one chunk
import math
import torch
from torch import nn

CHUNK = 64


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, Sq, d = x_q.shape
        Skv = x_kv.shape[1]
        q = self.W_q(x_q).view(B, Sq, self.h, self.d_k).transpose(1, 2) / math.sqrt(self.d_k)
        k = self.W_k(x_kv).view(B, Skv, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(x_kv).view(B, Skv, self.h, self.d_k).transpose(1, 2)
        m = torch.full((B, self.h, Sq, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(B, self.h, Sq, self.d_k, dtype=q.dtype, device=q.device)
        for s in range(0, Skv, CHUNK):
            sc = q @ k[:, :, s:s + CHUNK].transpose(-1, -2)
            m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
            p = torch.exp(sc - m_new)
            l = l * torch.exp(m - m_new) + p.sum(-1, keepdim=True)
            acc = acc + p @ v[:, :, s:s + CHUNK]
            m = m_new
        o = acc / l
        return self.W_o(o.transpose(1, 2).reshape(B, Sq, d))
