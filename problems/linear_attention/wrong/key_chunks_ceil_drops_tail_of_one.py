# expect: wrong_answer
# mistake: key/value sums taken in chunks of 16 with a hand-written ceil S // 16 + (S % 16 > 1) (should be > 0): a one-token ragged tail is dropped
import torch
import torch.nn.functional as F

def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    B, S, Dk = k.shape
    C = 16
    kv = torch.zeros(B, Dk, V.shape[-1], dtype=Q.dtype, device=Q.device)
    z = torch.zeros(B, Dk, dtype=Q.dtype, device=Q.device)
    for c in range(max(S // C + (1 if S % C > 1 else 0), 1)):
        kc, vc = k[:, c * C:(c + 1) * C], V[:, c * C:(c + 1) * C]
        kv = kv + kc.transpose(1, 2) @ vc
        z = z + kc.sum(1)
    return (q @ kv) / ((q @ z.unsqueeze(-1)) + eps)
