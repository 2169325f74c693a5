# expect: bad_interface
# mistake: eps defaults to 1e-5 (LayerNorm's habit); the contract says 1e-6, and callers who leave it out get another function
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-5):
    q, k = F.elu(Q) + 1, F.elu(K) + 1  # (B, S, Dk)
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)  # (B, Dk, Dv), (B, Dk)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)
