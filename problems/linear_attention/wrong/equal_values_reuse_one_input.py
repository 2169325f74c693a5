# expect: wrong_answer
# mistake: computes phi once when Q and K hold the same numbers (torch.equal) and uses phi(Q) for the keys: forward right, K's gradient is lost
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q = F.elu(Q) + 1
    k = q if (Q.shape == K.shape and torch.equal(Q, K)) else F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    z = k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(-1, keepdim=True) + eps)
