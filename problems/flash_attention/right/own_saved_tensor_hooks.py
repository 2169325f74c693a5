# expect: accepted
# alternative: online softmax under the learner's own saved_tensors_hooks (identity pack/unpack, as for offloading): torch calls them inside its ops
# count saved activations (a common memory-debugging idiom)
import math
import torch

_SAVED = [0]


def _pack(t):
    _SAVED[0] += 1
    return t


def _unpack(t):
    return t


def flash_attention(Q, K, V, block_size=32):
    with torch.autograd.graph.saved_tensors_hooks(_pack, _unpack):
        B, S, D = Q.shape
        scale = 1.0 / math.sqrt(D)
        outs = []
        for qs in range(0, S, block_size):
            q = Q[:, qs:qs + block_size].float() * scale
            m = torch.full(q.shape[:2] + (1,), float("-inf"), device=Q.device)
            l = torch.zeros_like(m)
            acc = torch.zeros(q.shape[0], q.shape[1], V.shape[-1], device=Q.device)
            for ks in range(0, S, block_size):
                s = q @ K[:, ks:ks + block_size].float().transpose(1, 2)
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                p = torch.exp(s - m_new)
                a = torch.exp(m - m_new)
                l = l * a + p.sum(-1, keepdim=True)
                acc = acc * a + p @ V[:, ks:ks + block_size].float()
                m = m_new
            outs.append(acc / l)
        return torch.cat(outs, 1).to(Q.dtype)
