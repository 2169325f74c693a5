# expect: forbidden_call
# mistake: the fused kernel with is_causal=True
import torch.nn.functional as F


def causal_attention(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, is_causal=True)
