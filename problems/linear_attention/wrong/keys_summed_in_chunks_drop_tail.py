# expect: wrong_answer
# mistake: accumulates phi(K)^T V and sum phi(K) over chunks of 32 keys with range(0, S - S % 32, 32): the
# ragged last chunk of keys is never added (right only when 32 divides S)
import torch
import torch.nn.functional as F

CHUNK = 32


def linear_attention(Q, K, V, eps=1e-6):
    B, S, Dk = Q.shape
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = torch.zeros(B, Dk, V.shape[-1], dtype=Q.dtype, device=Q.device)
    z = torch.zeros(B, Dk, dtype=Q.dtype, device=Q.device)
    for s in range(0, S - S % CHUNK, CHUNK):
        kv = kv + k[:, s:s + CHUNK].transpose(1, 2) @ V[:, s:s + CHUNK]
        z = z + k[:, s:s + CHUNK].sum(dim=1)
    return (q @ kv) / ((q * z[:, None]).sum(-1, keepdim=True) + eps)
