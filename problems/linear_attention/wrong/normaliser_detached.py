# expect: wrong_answer
# mistake: detaches the normaliser "for stability" (a stop-gradient some kernels use): the forward is exact, but
# the gradients of Q and K miss the denominator's part
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    den = (q @ k.sum(dim=1).unsqueeze(-1)).detach() + eps  # (B, S, 1)
    return (q @ kv) / den
