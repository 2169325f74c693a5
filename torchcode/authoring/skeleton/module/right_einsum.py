# expect: accepted
# alternative: einsum
import torch
from torch import nn


class ${name}(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)

    def forward(self, x):
        s = torch.einsum("bqd,bkd->bqk", self.W_q(x), self.W_k(x)) / x.shape[-1] ** 0.5
        return torch.einsum("bqk,bkd->bqd", s.softmax(-1), self.W_v(x))
