# expect: wrong_answer
# mistake: applies the feature map to the queries and forgets it on the keys
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q = F.elu(Q) + 1
    kv = K.transpose(1, 2) @ V
    den = q @ K.sum(1).unsqueeze(-1)
    return (q @ kv) / (den + eps)
