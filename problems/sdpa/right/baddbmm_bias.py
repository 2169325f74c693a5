# expect: accepted
# alternative: batch dims flattened for torch.baddbmm: the mask becomes an additive 0 / -inf bias in the inputs'
# dtype (broadcast to the full score shape first), added by the same kernel that scales Q K^T
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    *batch, Lq, Dk = Q.shape
    Lk = K.shape[-2]
    q, k, v = Q.reshape(-1, Lq, Dk), K.reshape(-1, Lk, Dk), V.reshape(-1, Lk, V.shape[-1])
    bias = torch.zeros(q.shape[0], Lq, Lk, dtype=Q.dtype, device=Q.device)
    if mask is not None:
        full = torch.broadcast_to(mask, (*batch, Lq, Lk)).reshape(-1, Lq, Lk)
        bias = bias.masked_fill(~full, float("-inf"))
    scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=Dk ** -0.5)
    return torch.bmm(torch.softmax(scores, dim=-1), v).reshape(*batch, Lq, V.shape[-1])
