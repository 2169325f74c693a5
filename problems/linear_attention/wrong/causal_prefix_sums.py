# expect: wrong_answer
# mistake: implements the causal (recurrent) variant: query i sees keys <= i; this problem is non-causal, every query sees all keys
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    q, k = F.elu(Q) + 1, F.elu(K) + 1
    B, S, Dk = q.shape
    state = q.new_zeros(B, Dk, V.shape[-1])  # running sum of phi(k_j)^T v_j
    z = q.new_zeros(B, Dk)
    outs = []
    for i in range(S):
        state = state + k[:, i, :, None] * V[:, i, None, :]
        z = z + k[:, i]
        num = torch.einsum("bd,bde->be", q[:, i], state)
        outs.append(num / ((q[:, i] * z).sum(-1, keepdim=True) + eps))
    return torch.stack(outs, dim=1)
