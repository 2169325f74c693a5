# expect: wrong_answer
# mistake: online softmax over 64-key tiles that "skips the rescale when the max did not change" with `if (m_new > m).all():` (should be any, or always rescale): on a later tile where only some rows get a new max, those rows keep an accumulator and sum scaled to their old max; exact while Sk <= 64
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.dk = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        B, Sq, dm = Q.shape
        Sk = K.shape[1]
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)
        k = self.W_k(K).view(B, Sk, self.h, self.dk).transpose(1, 2)
        v = self.W_v(V).view(B, Sk, self.h, self.dk).transpose(1, 2)
        T = 64
        scale = 1.0 / math.sqrt(self.dk)
        m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=Q.dtype, device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros_like(q)
        for ks in range(0, Sk, T):
            s = q @ k[:, :, ks:ks + T].transpose(-2, -1) * scale
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            if (m_new > m).all():  # rescale only when the max moved
                alpha = torch.exp(m - m_new)
                l = alpha * l
                acc = alpha * acc
                m = m_new
            p = torch.exp(s - m)
            l = l + p.sum(-1, keepdim=True)
            acc = acc + p @ v[:, :, ks:ks + T]
        o = (acc / l).transpose(1, 2).reshape(B, Sq, dm)
        return self.W_o(o)
