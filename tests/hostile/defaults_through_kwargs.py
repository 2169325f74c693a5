# expect: wrong_answer
# problem: linear_attention
# eps taken from **kwargs with a fallback of 1e-5: the def names no eps at all, so there is no default to
# read; the grader's calls with eps=... get the right function. (*args keeps a positional eps callable:
# with **options alone the signature is refused as a wrong interface.)
import torch.nn.functional as F


def linear_attention(Q, K, V, *args, **options):
    eps = options.get("eps", 1e-5)
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    kv, z = k.transpose(1, 2) @ V, k.sum(dim=1)
    return (q @ kv) / ((q * z[:, None, :]).sum(dim=-1, keepdim=True) + eps)
