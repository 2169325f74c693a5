# expect: accepted
# alternative: the formula for one sequence, mapped over the batch with torch.func.vmap (eps passed through, not mapped)
import torch
import torch.nn.functional as F


def _one(q, k, v, eps):
    q, k = F.elu(q) + 1, F.elu(k) + 1  # (S, Dk)
    return (q @ (k.T @ v)) / (q @ k.sum(0) + eps).unsqueeze(-1)


def linear_attention(Q, K, V, eps=1e-6):
    return torch.func.vmap(_one, in_dims=(0, 0, 0, None))(Q, K, V, eps)
