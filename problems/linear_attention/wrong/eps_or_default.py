# expect: wrong_answer
# mistake: `eps = eps or 1e-6` treats an eps of 0 given by the caller as missing and adds 1e-6 anyway
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    eps = eps or 1e-6  # 0.0 is falsy: the caller's eps=0 becomes 1e-6
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    denominator = (q * k.sum(dim=1, keepdim=True)).sum(dim=-1, keepdim=True) + eps
    return (q @ kv) / denominator
