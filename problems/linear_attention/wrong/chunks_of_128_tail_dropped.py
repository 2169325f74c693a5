# expect: wrong_answer
# mistake: sums keys/values as (B, S // 128, 128, D) chunks via reshape of K[:, :S // 128 * 128] (one chunk of everything when S < 128): the last S % 128 keys of a longer sequence are dropped
import torch
import torch.nn.functional as F

C = 128


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    B, S, Dk = k.shape
    Dv = V.shape[-1]
    if S < C:
        kc, vc = k.unsqueeze(1), V.unsqueeze(1)
    else:
        n = S // C
        kc = k[:, : n * C].reshape(B, n, C, Dk)
        vc = V[:, : n * C].reshape(B, n, C, Dv)
    kv = torch.einsum("bncd,bnce->bde", kc, vc)
    z = kc.sum((1, 2))
    return (q @ kv) / ((q @ z.unsqueeze(-1)) + eps)
