# expect: wrong_answer
# mistake: fills future keys with torch.finfo(torch.float16).min (-65504, "safe in half precision") in every
# dtype: in float32 or bfloat16 a token whose visible scores are all below -65504 looks at masked keys
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split(self, x):
        B, S, _ = x.shape
        return x.view(B, S, self.num_heads, self.d_k).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        P = 0
        if cache is not None:
            P = cache[0].shape[2]
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        qpos = P + torch.arange(S, device=x.device)
        kpos = torch.arange(k.shape[2], device=x.device)
        s = s.masked_fill(kpos[None, :] > qpos[:, None], torch.finfo(torch.float16).min)
        out = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)
