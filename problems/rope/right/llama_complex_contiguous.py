# expect: accepted
# alternative: Meta LLaMA's precompute_freqs_cis / apply_rotary_emb, with .contiguous() before the pairs are viewed
# as complex numbers (view_as_complex needs them adjacent in memory; the caller's q may be a transposed view)
import torch


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))


def apply_rope(q, k, base=10000.0):
    freqs_cis = precompute_freqs_cis(q.shape[-1], q.shape[1], base).to(q.device)
    xq_ = torch.view_as_complex(q.float().contiguous().reshape(*q.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(k.float().contiguous().reshape(*k.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(2)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(2)
    return xq_out.type_as(q), xk_out.type_as(k)
