# expect: runtime_error
# mistake: HF style softmax(scores, dtype=torch.float32) for accuracy, but the weights are never cast back to the
# values' dtype: fine in float32, while in bfloat16/float16 the float32 weights meet half-precision values
import math

import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def split(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.h, self.d_k).transpose(1, 2)

    def forward(self, Q, K, V):
        q, k, v = self.split(self.W_q(Q)), self.split(self.W_k(K)), self.split(self.W_v(V))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1, dtype=torch.float32)
        out = (weights @ v.float()).transpose(1, 2).reshape(Q.shape[0], Q.shape[1], -1)
        return self.W_o(out)
