# expect: wrong_answer
# mistake: phi written as torch.where(x > 0, x + 1, exp(x)): exp overflows in the unused branch for large x, and where() turns that into NaN gradients (float16)
import torch


def linear_attention(Q, K, V, eps=1e-6):
    def phi(x):
        return torch.where(x > 0, x + 1, torch.exp(x))

    q, k = phi(Q), phi(K)
    V1 = torch.cat([V, torch.ones_like(V[..., :1])], dim=-1)  # (B, S, Dv + 1)
    out = q @ (k.transpose(-2, -1) @ V1)  # (B, S, Dv + 1)
    return out[..., :-1] / (out[..., -1:] + eps)
