# expect: accepted
# alternative: written like nanoGPT's CausalSelfAttention turned into cross-attention: view/transpose on the
# projections (freshly computed, so contiguous), no mask, the merge with .contiguous().view
import math

import torch.nn.functional as F
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.n_head, self.n_embd = num_heads, d_model
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv):
        B, T, C = x_q.size()
        S = x_kv.size(1)
        q = self.W_q(x_q).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = self.W_k(x_kv).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.W_v(x_kv).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(y)
