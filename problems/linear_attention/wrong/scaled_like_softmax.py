# expect: wrong_answer
# mistake: carries the softmax habit over and scales the queries by 1 / sqrt(Dk) before the feature map; phi is
# not scale-invariant (elu(x) + 1 = x + 1 for x > 0), so every weight changes
import math

import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q / math.sqrt(Q.shape[-1])) + 1, F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    den = (q * k.sum(dim=1, keepdim=True)).sum(-1, keepdim=True) + eps
    return (q @ kv) / den
