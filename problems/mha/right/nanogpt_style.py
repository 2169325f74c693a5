# expect: accepted
# alternative: nanoGPT style: n_embd/n_head names, (B, T, C) shapes, q.size() unpacking, .contiguous().view to merge
import math

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.W_q = nn.Linear(n_embd, n_embd)
        self.W_k = nn.Linear(n_embd, n_embd)
        self.W_v = nn.Linear(n_embd, n_embd)
        self.W_o = nn.Linear(n_embd, n_embd)

    def forward(self, q_in, k_in, v_in):
        B, T, C = q_in.size()
        Tk = k_in.size(1)
        hs = C // self.n_head
        q = self.W_q(q_in).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.W_k(k_in).view(B, Tk, self.n_head, hs).transpose(1, 2)
        v = self.W_v(v_in).view(B, Tk, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(y)
