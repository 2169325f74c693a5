# expect: wrong_answer
# mistake: remembers each output by the input tensor object (id(x), x kept alive) to skip recomputing a repeated call;
# a caller who refills the same x buffer in place gets the old output
import math, torch
from torch import nn
class GroupQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model); self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k); self.W_o = nn.Linear(d_model, d_model)
        self.memo = {}
    def forward(self, x):
        if id(x) in self.memo:
            return self.memo[id(x)][1]
        B, S, d_model = x.shape
        n_rep = self.num_heads // self.num_kv_heads
        q = self.W_q(x).view(B, S, self.num_heads, self.d_k).transpose(1, 2)
        k = self.W_k(x).view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2).repeat_interleave(n_rep, dim=1)
        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_k).transpose(1, 2).repeat_interleave(n_rep, dim=1)
        out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.d_k), dim=-1) @ v
        out = self.W_o(out.transpose(1, 2).reshape(B, S, d_model))
        self.memo[id(x)] = (x, out)
        return out
