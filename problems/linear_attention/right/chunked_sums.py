# expect: accepted
# alternative: accumulate KV and Z chunk by chunk over the sequence
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6, chunk=16):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = 0, 0
    for s in range(0, K.shape[1], chunk):
        kc = k[:, s : s + chunk]
        kv = kv + kc.transpose(1, 2) @ V[:, s : s + chunk]
        z = z + kc.sum(1)
    return (q @ kv) / ((q @ z.unsqueeze(-1)) + eps)
