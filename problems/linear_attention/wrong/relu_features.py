# expect: wrong_answer
# mistake: relu instead of elu + 1
import torch


def linear_attention(Q, K, V, eps=1e-6):
    q, k = torch.relu(Q), torch.relu(K)
    kv, z = k.transpose(1, 2) @ V, k.sum(1)
    return (q @ kv) / ((q * z[:, None]).sum(-1, keepdim=True) + eps)
