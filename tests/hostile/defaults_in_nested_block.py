# expect: bad_interface
# problem: linear_attention
# The top-level def has eps=1e-6; a def inside an always-true block, later in the file, replaces it
# with eps=1e-5. A check that reads top-level statements only never sees the second one.
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)


try:
    def linear_attention(Q, K, V, eps=1e-5):
        q, k = F.elu(Q) + 1, F.elu(K) + 1
        kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
        return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)
except NameError:
    pass
