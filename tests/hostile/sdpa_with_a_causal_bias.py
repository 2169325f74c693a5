# expect: forbidden_call
# problem: causal_attention
# a causal mask object of PyTorch's own (CausalBias) passed to the forbidden fused attention
import torch.nn.functional as F
from torch.nn.attention.bias import causal_upper_left


def causal_attention(Q, K, V):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=causal_upper_left(Q.shape[-2], K.shape[-2]))
