# expect: accepted
# alternative: mask from comparing position indices, torch.where with the dtype's minimum
import torch


def causal_attention(Q, K, V):
    S = Q.shape[1]
    i = torch.arange(S, device=Q.device)
    allowed = i[None, :] <= i[:, None]  # (S, S): key j <= query i
    scores = torch.einsum("bid,bjd->bij", Q, K) / Q.shape[-1] ** 0.5
    scores = torch.where(allowed, scores, torch.finfo(Q.dtype).min)
    return torch.einsum("bij,bjd->bid", scores.softmax(-1), V)
