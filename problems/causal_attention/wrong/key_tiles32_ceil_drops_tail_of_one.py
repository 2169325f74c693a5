# expect: wrong_answer
# mistake: an online softmax over key tiles of 32 whose tile count is S // 32 + (S % 32 > 1) (the ceil should test > 0): when S % 32 == 1 (S > 1) the last key is never visited, so the last position never sees its own key
import math
import torch

def causal_attention(Q, K, V):
    B, S, D = Q.shape
    T = 32
    q = Q.float() / math.sqrt(D)
    rows = torch.arange(S, device=Q.device)[:, None]
    m = torch.full((B, S, 1), float('-inf'), device=Q.device)
    l = torch.zeros(B, S, 1, device=Q.device)
    acc = torch.zeros(B, S, V.shape[-1], device=Q.device)
    for t in range(max(S // T + (1 if S % T > 1 else 0), 1)):
        j = t * T
        k, v = K[:, j:j + T].float(), V[:, j:j + T].float()
        s = q @ k.transpose(1, 2)
        cols = torch.arange(j, j + k.shape[1], device=Q.device)[None, :]
        s = s.masked_fill(cols > rows, float('-inf'))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # rows with no key yet
        p = torch.exp(s - safe)
        a = torch.exp(m - safe)
        l = a * l + p.sum(-1, keepdim=True)
        acc = a * acc + p @ v
        m = m_new
    return (acc / l).to(Q.dtype)
