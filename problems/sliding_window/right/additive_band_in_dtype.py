# expect: accepted
# alternative: an additive band bias made in the inputs' dtype (0 inside, -inf outside), added inside
# torch.baddbmm while it scales Q K^T
import torch


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    pos = torch.arange(S, device=Q.device)
    outside = (pos[None, :] - pos[:, None]).abs() > window_size
    bias = torch.zeros(S, S, dtype=Q.dtype, device=Q.device).masked_fill(outside, float("-inf"))
    scores = torch.baddbmm(bias.expand(B, S, S), Q, K.transpose(1, 2), alpha=D ** -0.5)
    return torch.bmm(scores.softmax(dim=-1), V)
