# expect: wrong_answer
# mistake: fast-transformers' einsum formulation: Z = 1 / (phi(q) . sum phi(k) + eps), then out = phi(q) KV Z.
# Right in float32 and bfloat16; in float16 the backward of 1 / x multiplies by Z^2 (~1e-7, below float16's normal
# range), and the gradient of Q loses half its value: divide by the normaliser instead
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    KV = torch.einsum("nsd,nsm->nmd", k, V)
    Z = 1 / (torch.einsum("nld,nd->nl", q, k.sum(dim=1)) + eps)
    return torch.einsum("nld,nmd,nl->nlm", q, KV, Z)
