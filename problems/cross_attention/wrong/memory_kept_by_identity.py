# expect: wrong_answer
# mistake: the decoding speed-up done wrong: the memory's projected keys and values are kept on the layer, keyed by
# the x_kv tensor object; a caller who refills that buffer in place, or changes the weights, gets stale keys/values
import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self._memory = {}

    def forward(self, x_q, x_kv):
        hit = self._memory.get(id(x_kv))
        if hit is None or hit[0] is not x_kv:
            k = self.W_k(x_kv).unflatten(-1, (self.h, self.dk))
            v = self.W_v(x_kv).unflatten(-1, (self.h, self.dk))
            hit = self._memory[id(x_kv)] = (x_kv, k, v)
        _, k, v = hit
        q = self.W_q(x_q).unflatten(-1, (self.h, self.dk))
        w = torch.einsum("bqhd,bkhd->bhqk", q, k).div(self.dk ** 0.5).softmax(-1)
        return self.W_o(torch.einsum("bhqk,bkhd->bqhd", w, v).flatten(-2))
