# expect: accepted
# alternative: the band as tril(w) & triu(-w), torch.where with -inf
import torch


def sliding_window_attention(Q, K, V, window_size):
    S = Q.shape[1]
    ones = torch.ones(S, S, dtype=torch.bool, device=Q.device)
    band = ones.tril(window_size) & ones.triu(-window_size)
    scores = torch.einsum("bid,bjd->bij", Q, K) / Q.shape[-1] ** 0.5
    scores = torch.where(band, scores, float("-inf"))
    return scores.softmax(-1) @ V
