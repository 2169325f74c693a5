# expect: forbidden_call
# The aten SDPA on 3-D inputs: its math fallback decomposes before a dispatch mode sees a fused kernel.
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    q, k, v = (t.reshape(-1, *t.shape[-2:]) for t in (Q, K, V))
    m = None if mask is None else mask.expand(*Q.shape[:-1], K.shape[-2]).reshape(-1, q.shape[-2], k.shape[-2])
    out = torch.ops.aten.scaled_dot_product_attention.default(q, k, v, attn_mask=m)
    return out.reshape(*Q.shape[:-1], V.shape[-1])
