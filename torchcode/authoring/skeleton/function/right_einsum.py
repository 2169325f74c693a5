# expect: accepted
# alternative: einsum
import torch


def ${name}(Q, K, V):
    scores = torch.einsum("bqd,bkd->bqk", Q, K) / Q.shape[-1] ** 0.5
    return torch.einsum("bqk,bkd->bqd", scores.softmax(-1), V)
