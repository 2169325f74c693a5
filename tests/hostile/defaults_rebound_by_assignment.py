# expect: bad_interface
# problem: linear_attention
# The file's last top-level def reads eps=1e-6, as the contract says; the name is then rebound to
# another function whose eps defaults to 1e-5. A check that reads only the source's defs sees 1e-6.
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


def _layernorm_habit(Q, K, V, eps=1e-5):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


linear_attention = _layernorm_habit
