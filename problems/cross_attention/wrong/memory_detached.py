# expect: wrong_answer
# mistake: detaches the encoder memory ("the encoder is frozen"): x_kv gets no gradient, although the layer is
# trained end to end and the grader differentiates every input
import math

import torch
from torch import nn


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def heads(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.h, self.d_k).transpose(1, 2)

    def forward(self, x_q, x_kv):
        memory = x_kv.detach()
        q, k, v = self.heads(self.W_q(x_q)), self.heads(self.W_k(memory)), self.heads(self.W_v(memory))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1)
        return self.W_o((weights @ v).transpose(1, 2).reshape(x_q.shape))
