# expect: wrong_answer
# mistake: eps folded into the feature map too (phi(x) = elu(x) + 1 + eps, "keeps features > 0") as well as the
#   denominator: eps then changes phi(q) and phi(k), and a large eps changes the output
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1 + eps, F.elu(K) + 1 + eps
    kv = k.transpose(1, 2) @ V
    z = k.sum(1)
    return (q @ kv) / ((q * z[:, None]).sum(-1, keepdim=True) + eps)
