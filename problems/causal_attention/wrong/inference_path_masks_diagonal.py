# expect: wrong_answer
# mistake: a memory-saving inference path, taken when autograd is off (torch.no_grad() / torch.inference_mode(), how every
# generation loop calls a model): the scores are masked and normalised in place... and the mask is built with
# triu(0) instead of triu(1), so under no_grad each token cannot see itself (the diagonal is masked; the first
# token's row is all -inf and becomes NaN). With autograd on, the ordinary path is right (forward-only cases
# run under torch.no_grad(), as inference does).
import math

import torch


def causal_attention(Q, K, V):
    S, D = Q.shape[-2:]
    s = Q @ K.transpose(-2, -1) / math.sqrt(D)
    if not torch.is_grad_enabled():
        s.masked_fill_(torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(0), float("-inf"))
        s.sub_(s.amax(-1, keepdim=True)).exp_()
        s.div_(s.sum(-1, keepdim=True))
        return s @ V
    future = torch.ones(S, S, dtype=torch.bool, device=Q.device).triu(1)
    return torch.softmax(s.masked_fill(future, float("-inf")), dim=-1) @ V
