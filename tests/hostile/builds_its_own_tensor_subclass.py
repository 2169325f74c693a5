# expect: runtime_error
# problem: causal_attention
# a mask object of its own (a torch.Tensor subclass built by its constructor): under the grader's dispatch mode that
# constructor fails inside torch; the message says why and what to use instead (a plain bool mask)
import math
import torch


class Causal(torch.Tensor):
    def __init__(self, n, m):
        self.n, self.m = n, m


def causal_attention(Q, K, V):
    c = Causal(Q.shape[-2], K.shape[-2])
    keep = torch.ones(c.n, c.m, dtype=torch.bool).tril()
    s = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ V
