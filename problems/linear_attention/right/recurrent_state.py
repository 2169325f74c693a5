# expect: accepted
# alternative: the RNN view of linear attention: one state (phi(k)^T v summed) and one normaliser built key block by
# key block, then read by every query (non-causal, so the state is complete before any query reads it)
import torch
import torch.nn.functional as F


def linear_attention(Q, K, V, eps=1e-6):
    B, S, Dk = K.shape
    phi_k = F.elu(K) + 1
    state = torch.zeros(B, Dk, V.shape[-1], dtype=V.dtype, device=V.device)
    norm = torch.zeros(B, 1, Dk, dtype=V.dtype, device=V.device)
    for s in range(0, S, 16):
        kb = phi_k[:, s:s + 16]
        state = state + torch.einsum("bsk,bsv->bkv", kb, V[:, s:s + 16])
        norm = norm + kb.sum(dim=1, keepdim=True)
    phi_q = F.elu(Q) + 1
    return torch.einsum("bsk,bkv->bsv", phi_q, state) / ((phi_q * norm).sum(-1, keepdim=True) + eps)
