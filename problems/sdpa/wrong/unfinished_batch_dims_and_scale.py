# expect: wrong_answer
# mistake: scales by 1/d_k, not 1/sqrt(d_k), and leaves more than two batch dimensions for later (raises
#   NotImplementedError there): the wrong answers are the verdict, not "not implemented yet" (attack26)
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    if Q.dim() > 4:
        raise NotImplementedError("more than two batch dims")
    scores = Q @ K.transpose(-2, -1) / Q.size(-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
