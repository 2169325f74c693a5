# expect: accepted
# alternative: einsum heads under the learner's own saved_tensors_hooks (identity): torch calls them inside its ops
import math
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    @staticmethod
    def _pack(t):
        return t

    @staticmethod
    def _unpack(t):
        return t

    def forward(self, Q, K, V):
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            h = self.num_heads
            q = self.W_q(Q).unflatten(-1, (h, -1))
            k = self.W_k(K).unflatten(-1, (h, -1))
            v = self.W_v(V).unflatten(-1, (h, -1))
            s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
            o = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)
            return self.W_o(o.flatten(-2))
