# expect: accepted
# alternative: the causal bias (0 on and below the diagonal, -inf above) in the inputs' dtype, added inside
# torch.baddbmm while it scales Q K^T
import torch


def causal_attention(Q, K, V):
    B, S, D = Q.shape
    bias = torch.full((S, S), float("-inf"), dtype=Q.dtype, device=Q.device).triu(1).expand(B, S, S)
    scores = torch.baddbmm(bias, Q, K.transpose(1, 2), alpha=D ** -0.5)
    return torch.bmm(scores.softmax(-1), V)
