# expect: accepted
# alternative: nanoGPT-style attention and residual dropout, both at p = 0.5 (off in eval mode): the training step's
#   mean over copies keeps eval mode's output within its allowance (review30: rejected on half the seeds at 0.055)
import math

import torch
import torch.nn.functional as F
from torch import nn

P = 0.5


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout=P):
        super().__init__()
        self.n_head = n_head
        self.W_q = nn.Linear(n_embd, n_embd)
        self.W_k = nn.Linear(n_embd, n_embd)
        self.W_v = nn.Linear(n_embd, n_embd)
        self.W_o = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, q_in, k_in, v_in):
        B, T, C = q_in.size()
        Tk = k_in.size(1)
        hs = C // self.n_head
        q = self.W_q(q_in).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_k(k_in).view(B, Tk, self.n_head, hs).transpose(1, 2)
        v = self.W_v(v_in).view(B, Tk, self.n_head, hs).transpose(1, 2)
        att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs)), dim=-1)
        att = self.attn_dropout(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.W_o(y))
