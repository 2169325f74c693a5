# expect: wrong_answer
# mistake: caches the key/value summary phi(K)^T V and sum phi(K) by the K and V tensor objects (to reuse them across
# queries, as a retrieval loop might); a caller who refills the same K, V buffers in place gets the old summary
import torch.nn.functional as F

_summaries = {}


def linear_attention(Q, K, V, eps=1e-6):
    key = (id(K), id(V))
    if key not in _summaries:
        k = F.elu(K) + 1  # (B, S, Dk)
        _summaries[key] = (K, V, k.transpose(1, 2) @ V, k.sum(dim=1))  # K, V kept alive: their ids stay theirs
    _, _, kv, z = _summaries[key]
    q = F.elu(Q) + 1  # (B, S, Dk)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)
