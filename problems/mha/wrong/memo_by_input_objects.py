# expect: wrong_answer
# mistake: under torch.no_grad() the output is memoised per (Q, K, V) tensor objects (checked alive through weak
# references, so a new tensor that gets a freed one's id() is never mistaken for it) and per weight version:
# stale when the caller writes new values into the same input buffers
import math
import weakref

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self._memo = {}

    def _attend(self, Q, K, V):
        B, Sq, D = Q.shape
        q = self.W_q(Q).view(B, Sq, self.h, self.dk).transpose(1, 2)         # (B, H, Sq, dk)
        k = self.W_k(K).view(B, -1, self.h, self.dk).transpose(1, 2)         # (B, H, Sk, dk)
        v = self.W_v(V).view(B, -1, self.h, self.dk).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dk), -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, Sq, D))

    def forward(self, Q, K, V):
        if torch.is_grad_enabled():
            return self._attend(Q, K, V)
        key = (id(Q), id(K), id(V), tuple(p._version for p in self.parameters()))
        hit = self._memo.get(key)
        if hit is not None and all(r() is t for r, t in zip(hit[0], (Q, K, V))):
            return hit[1]
        out = self._attend(Q, K, V)
        self._memo[key] = ((weakref.ref(Q), weakref.ref(K), weakref.ref(V)), out)
        return out
