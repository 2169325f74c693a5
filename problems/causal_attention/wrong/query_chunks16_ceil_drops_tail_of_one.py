# expect: wrong_answer
# mistake: queries processed in chunks of 16 with n = S // 16 + (S % 16 > 1) chunks (the ceil should test > 0): when S % 16 == 1 (S > 1) the last query row is never computed and stays zero
import math
import torch

def causal_attention(Q, K, V):
    B, S, D = Q.shape
    C = 16
    out = Q.new_zeros(B, S, V.shape[-1])
    n = max(S // C + (1 if S % C > 1 else 0), 1)
    for c in range(n):
        i0 = c * C
        q = Q[:, i0:i0 + C]
        s = q @ K.transpose(1, 2) / math.sqrt(D)
        rows = torch.arange(i0, i0 + q.shape[1], device=Q.device)[:, None]
        cols = torch.arange(S, device=Q.device)[None, :]
        s = s.masked_fill(cols > rows, float('-inf'))
        out[:, i0:i0 + C] = torch.softmax(s, -1) @ V
    return out
