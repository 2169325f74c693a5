# expect: wrong_answer
# problem: sdpa
# mask=None in the def, resolved in the body to a causal mask: no reading of defaults sees it; only a case that
# calls without mask on inputs where a mask changes the output does.
import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    if mask is None:
        mask = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool, device=Q.device).tril()
        mask[:, 0] = True
    *batch, Lq, Dk = Q.shape
    Lk = K.shape[-2]
    q, k, v = Q.reshape(-1, Lq, Dk), K.reshape(-1, Lk, Dk), V.reshape(-1, Lk, V.shape[-1])
    bias = torch.zeros(q.shape[0], Lq, Lk, dtype=Q.dtype, device=Q.device)
    if mask is not None:
        full = torch.broadcast_to(mask, (*batch, Lq, Lk)).reshape(-1, Lq, Lk)
        bias = bias.masked_fill(~full, float("-inf"))
    scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=Dk ** -0.5)
    return torch.bmm(torch.softmax(scores, dim=-1), v).reshape(*batch, Lq, V.shape[-1])
