# expect: accepted
# alternative: the length kept in a small helper with __index__, passed to torch as a size (torch reads it inside its ops)
import math
import torch


class Dim:
    def __init__(self, n):
        self.n = int(n)

    def __index__(self):
        return self.n


def causal_attention(Q, K, V):
    S = Dim(Q.shape[1])
    future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)
    s = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return s.masked_fill(future, float("-inf")).softmax(-1) @ V
