# expect: forbidden_call
# problem: causal_attention
# reaches PyTorch's fused attention through CausalBias's own dispatcher instead of F.scaled_dot_product_attention
from torch.nn.attention.bias import CausalBias, causal_upper_left


def causal_attention(Q, K, V):
    m = causal_upper_left(Q.shape[-2], K.shape[-2])
    return CausalBias._dispatch(Q, K, V, m, 0.0, False, None)
