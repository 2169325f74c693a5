# expect: wrong_answer
# Overwrites its inputs in place, hoping the comparison reads them afterwards.
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    with torch.no_grad():
        Q.zero_()
        V.zero_()
    return torch.zeros(*Q.shape[:-1], V.shape[-1])
