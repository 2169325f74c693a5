# expect: wrong_answer
# mistake: projected queries memoised by the x_q tensor object (and the weights' versions): a caller who refills x_q in place gets the old queries
import math
import weakref

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._q_memo = None

    def split(self, x):
        B, S, _ = x.shape
        return x.reshape(B, S, self.num_heads, self.d_k).transpose(1, 2)

    def forward(self, x_q, x_kv):
        B, Sq, d = x_q.shape
        key = (self.W_q.weight._version, self.W_q.bias._version)  # an optimizer step invalidates it
        m = self._q_memo
        if m is not None and m[0]() is x_q and m[1] == key:
            q = m[2]
        else:
            q = self.split(self.W_q(x_q))
            self._q_memo = (weakref.ref(x_q), key, q)
        k, v = self.split(self.W_k(x_kv)), self.split(self.W_v(x_kv))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, d))
