# expect: forbidden_call
# mistake: wraps torch.nn.MultiheadAttention
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, num_heads, batch_first=True)

    def forward(self, Q, K, V):
        return self.inner(Q, K, V, need_weights=False)[0]
