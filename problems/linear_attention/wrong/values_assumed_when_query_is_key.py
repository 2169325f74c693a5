# expect: wrong_answer
# mistake: a self-attention fast path taken when Q is K treats the call as attention(x, x, x): V is ignored
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    if Q is K:  # self-attention: one feature map serves queries, keys and values
        q = F.elu(Q) + 1
        kv = q.transpose(1, 2) @ Q
        z = q.sum(dim=1)
        return (q @ kv) / ((q * z[:, None, :]).sum(-1, keepdim=True) + eps)
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    z = k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(-1, keepdim=True) + eps)
