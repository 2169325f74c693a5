# expect: wrong_algorithm
# mistake: the linear-time path only under torch.no_grad() (an "inference fast path"); with autograd on, phi(Q) phi(K)^T half the query rows at a time: each block under the S x S size bound, S^2 work in all
import torch
import torch.nn.functional as F


def _phi(x):
    return F.elu(x) + 1


def linear_attention(Q, K, V, eps=1e-6):
    # Q, K: (B, S, D), V: (B, S, Dv)
    q, k = _phi(Q), _phi(K)
    if not torch.is_grad_enabled():
        kv = k.transpose(-2, -1) @ V  # (B, D, Dv)
        z = k.sum(1)  # (B, D)
        return (q @ kv) / ((q * z[:, None, :]).sum(-1, keepdim=True) + eps)
    S = Q.shape[1]
    c = max(1, S // 2)
    outs = []
    for i in range(0, S, c):
        A = q[:, i:i + c] @ k.transpose(-2, -1)  # (B, c, S)
        outs.append((A @ V) / (A.sum(-1, keepdim=True) + eps))
    return torch.cat(outs, 1)
