# expect: wrong_output
# mistake: returns (out, k, v) instead of (out, (k, v)): the next call, handed output[1], gets the keys alone
import math
import torch
from torch import nn

class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, cache=None):
        B, S, D = x.shape
        split = lambda t: t.view(B, S, self.h, self.dk).transpose(1, 2)
        q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        P = k.shape[2] - S
        s = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        m = torch.ones(S, k.shape[2], dtype=torch.bool, device=x.device).tril(P)
        w = torch.softmax(s.masked_fill(~m, float("-inf")), -1)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, S, D)), k, v
