# expect: wrong_output
import torch


class Liar(torch.Tensor):
    def __eq__(self, other):
        return True


def scaled_dot_product_attention(Q, K, V, mask=None):
    return torch.zeros(*Q.shape[:-1], V.shape[-1]).as_subclass(Liar)
