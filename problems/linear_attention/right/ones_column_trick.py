# expect: accepted
# alternative: appends a ones column to V so one product gives numerator and normaliser together
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    V1 = torch.cat([V, torch.ones_like(V[..., :1])], dim=-1)  # (B, S, Dv + 1)
    out = q @ (k.transpose(-2, -1) @ V1)  # (B, S, Dv + 1)
    return out[..., :-1] / (out[..., -1:] + eps)
