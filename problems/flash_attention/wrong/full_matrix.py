# expect: too_much_memory
# mistake: right values, but materialises the full S x S score matrix
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    return torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1) @ V
