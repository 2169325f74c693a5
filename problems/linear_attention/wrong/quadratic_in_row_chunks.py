# expect: wrong_algorithm
# mistake: right values and never a B x S x S tensor, but it forms phi(Q) phi(K)^T a block of rows at a time:
# quadratic work, the cost linear attention exists to avoid
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6, rows=8):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    outs = []
    for s in range(0, Q.shape[1], rows):
        a = q[:, s : s + rows] @ k.transpose(1, 2)  # (B, rows, S): every key for these queries
        outs.append((a @ V) / (a.sum(-1, keepdim=True) + eps))
    return torch.cat(outs, dim=1)
