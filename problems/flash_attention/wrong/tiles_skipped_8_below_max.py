# expect: wrong_answer
# mistake: "skip work" optimisation: a key tile whose best score is more than 8 below the running max is skipped (its exp is "negligible")
import math, torch
def flash_attention(Q, K, V, block_size=32):
    B, S, D = Q.shape
    sc = 1.0 / math.sqrt(D)
    m = torch.full((B, S, 1), float('-inf'), device=Q.device)
    l = torch.zeros(B, S, 1, device=Q.device)
    acc = torch.zeros(B, S, V.shape[-1], device=Q.device)
    for ks in range(0, S, block_size):
        s = (Q.float() @ K[:, ks:ks+block_size].float().transpose(-2, -1)) * sc
        tmax = s.amax(-1, keepdim=True)
        if bool((tmax < m - 8).all()):
            continue
        mn = torch.maximum(m, tmax)
        p = torch.exp(s - mn); a = torch.exp(m - mn)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ V[:, ks:ks+block_size].float()
        m = mn
    return (acc / l).to(Q.dtype)
