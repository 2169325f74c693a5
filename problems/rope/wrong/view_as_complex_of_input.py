# expect: runtime_error
# mistake: Meta LLaMA's apply_rotary_emb as written for its own caller, whose q is always freshly projected:
# view_as_complex needs the pairs' last dim in unit stride, and a transposed or sliced q (the caller's choice)
# does not have it; call .contiguous() before viewing the pairs as complex numbers
import torch


def apply_rope(q, k, base=10000.0):
    B, S, D = q.shape
    freqs = 1.0 / (base ** (torch.arange(0, D, 2, device=q.device)[: D // 2].float() / D))
    freqs_cis = torch.polar(torch.ones(S, D // 2, device=q.device), torch.outer(torch.arange(S, device=q.device).float(), freqs))
    q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
    k_ = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
    return torch.view_as_real(q_ * freqs_cis).flatten(2).type_as(q), torch.view_as_real(k_ * freqs_cis).flatten(2).type_as(k)
