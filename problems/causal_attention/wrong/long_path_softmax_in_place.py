# expect: runtime_error
# mistake: past 128 tokens, queries in chunks of 128 with the softmax done in place (to save memory): the in-place
#   ops overwrite what autograd saved, so backward fails on long sequences (training); short ones and inference pass
import math
import torch


def causal_attention(Q, K, V):
    B, S, D = Q.shape
    scale = 1.0 / math.sqrt(D)
    if S <= 128:
        s = Q @ K.transpose(1, 2) * scale
        causal = torch.ones(S, S, dtype=torch.bool, device=Q.device).tril()
        return torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1) @ V
    out = []
    pos = torch.arange(S, device=Q.device)
    for i in range(0, S, 128):
        j = min(i + 128, S)
        s = Q[:, i:j] @ K[:, :j].transpose(1, 2)          # only the keys up to the chunk's last query
        s.mul_(scale)
        s.masked_fill_(pos[None, :j] > pos[i:j, None], float("-inf"))
        s.sub_(s.amax(-1, keepdim=True))
        s.exp_()
        s.div_(s.sum(-1, keepdim=True))
        out.append(s @ V[:, :j])
    return torch.cat(out, dim=1)
