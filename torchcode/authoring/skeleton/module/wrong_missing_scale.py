# expect: wrong_answer
# mistake: forgets the 1/sqrt(d_model) scale
import torch
from torch import nn


class ${name}(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, d_model) for _ in range(3))

    def forward(self, x):
        return torch.softmax(self.W_q(x) @ self.W_k(x).transpose(-2, -1), dim=-1) @ self.W_v(x)
