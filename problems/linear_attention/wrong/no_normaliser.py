# expect: wrong_answer
# mistake: forgets the denominator
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    return q @ (k.transpose(1, 2) @ V)
