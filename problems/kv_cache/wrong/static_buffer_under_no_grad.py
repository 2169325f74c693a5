# expect: wrong_answer
# mistake: the corpus's static_buffer_in_place (a preallocated cache buffer on self, written in place), gated the way a real
# static cache is: only for inference, when autograd is off (in-place writes into a buffer cannot be used with
# autograd, so training keeps the torch.cat path). Generation runs under torch.no_grad(); there a branch from an
# earlier cache overwrites keys that the other branch's returned cache still views, and a second sequence
# decoded in turns overwrites the first's. Forward-only cases run
# under torch.no_grad(), as generation does.
import math

import torch
from torch import nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split(self, x):
        return x.reshape(x.shape[0], x.shape[1], self.h, self.dk).transpose(1, 2)

    def forward(self, x, cache=None):
        B, S, D = x.shape
        q, k, v = self.split(self.W_q(x)), self.split(self.W_k(x)), self.split(self.W_v(x))
        past = 0 if cache is None else cache[0].shape[2]
        if torch.is_grad_enabled():  # training: plain concatenation
            if cache is not None:
                k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
            mask = torch.ones(S, past + S, dtype=torch.bool, device=x.device).tril(diagonal=past)
            s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~mask, float("-inf"))
            out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
            return self.W_o(out), (k, v)
        if cache is None or not hasattr(self, "buf_k") or self.buf_k.shape[0] != B or self.buf_k.shape[2] < past + S:
            n = max(2048, past + S)  # a static cache of the model's context length (or longer, when needed)
            self.buf_k = x.new_zeros(B, self.h, n, self.dk)
            self.buf_v = x.new_zeros(B, self.h, n, self.dk)
        if cache is not None:
            self.buf_k[:, :, :past], self.buf_v[:, :, :past] = cache[0], cache[1]
        self.buf_k[:, :, past : past + S] = k
        self.buf_v[:, :, past : past + S] = v
        k, v = self.buf_k[:, :, : past + S], self.buf_v[:, :, : past + S]
        mask = torch.ones(S, past + S, dtype=torch.bool, device=x.device).tril(diagonal=past)
        s = (q @ k.transpose(-2, -1) / math.sqrt(self.dk)).masked_fill(~mask, float("-inf"))
        out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), (k, v)
