# expect: runtime_error
# mistake: past 256 tokens, query blocks of 128 read only their band of keys into a score buffer reused through
#   out= arguments: ops with out= do not support autograd, so a long sequence that needs gradients raises
import math
import torch


def sliding_window_attention(Q, K, V, window_size):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    pos = torch.arange(S, device=Q.device)
    if S <= 256:
        s = Q @ K.transpose(1, 2) * scale
        s = s.masked_fill((pos[:, None] - pos[None, :]).abs() > window_size, float("-inf"))
        return torch.softmax(s, dim=-1) @ V
    outs = []
    for i in range(0, S, 128):
        j = min(i + 128, S)
        lo, hi = max(0, i - window_size), min(S, j + window_size)
        s = torch.empty(B, j - i, hi - lo, dtype=Q.dtype, device=Q.device)
        torch.bmm(Q[:, i:j], K[:, lo:hi].transpose(1, 2), out=s)
        s.mul_(scale)
        s.masked_fill_((pos[i:j, None] - pos[None, lo:hi]).abs() > window_size, float("-inf"))
        s.copy_(torch.softmax(s, dim=-1))
        outs.append(s @ V[:, lo:hi])
    return torch.cat(outs, dim=1)
