# expect: accepted
# alternative: torch.compile(fullgraph=True, dynamic=True): under the grader's guards compile breaks graphs, so fullgraph is dropped there
import torch
import torch.nn.functional as F


@torch.compile(fullgraph=True, dynamic=True)
def linear_attention(Q, K, V, eps: float = 1e-6):
    q = F.elu(Q) + 1
    k = F.elu(K) + 1
    kv = k.transpose(1, 2) @ V
    den = q @ k.sum(1, keepdim=True).transpose(1, 2) + eps
    return (q @ kv) / den
