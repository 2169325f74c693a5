# expect: wrong_algorithm
# problem: linear_attention
# Quadratic work (phi(Q) phi(K)^T a block of rows at a time) with cheap linear filler added at every size (512
# pointwise passes over an (S, 32) tensor): the growth of the total from the first size to the last is pulled under
# S^1.5. The bound on the last call's total work (max_work) holds however much is added.
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6, rows=8):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    outs = []
    for s in range(0, Q.shape[1], rows):
        a = q[:, s:s + rows] @ k.transpose(1, 2)  # (B, rows, S): S x S work over the loop
        outs.append((a @ V) / (a.sum(-1, keepdim=True) + eps))
    pad = Q.new_zeros(Q.shape[1], 32)
    for _ in range(512):
        pad = pad + 1
    return torch.cat(outs, dim=1)
