# expect: forbidden_call
# problem: mha
# Hostile: the grader's own wrapper of torch.set_num_threads is a Python function whose globals reach the guards'
# module; read by a name built at run time (getattr(f, "__glob" + "als__")), they give the kernel bans to destroy and
# the reporter to silence before the fused kernel runs. getattr refuses that name (reflection.py).
import importlib

import torch
import torch.nn.functional as F
from torch import nn


def _unban():
    g = getattr(torch.set_num_threads, "__glob" + "als__")
    guards = importlib.import_module("torch" + "code.grader.guards") if "guards" not in g else g["guards"]
    guards._REPORT[0] = lambda **note: None
    for lib in guards._LIBRARY:
        getattr(lib, "_de" + "stroy")()
    guards._BANNED.clear()
    for g in guards._ACTIVE:
        g.ops, g.by_id, g.classes = {}, {}, []


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V):
        _unban()
        B, Sq, D = Q.shape
        sp = lambda t: t.reshape(B, t.shape[1], self.h, self.d_k).transpose(1, 2)  # noqa: E731
        out = F.scaled_dot_product_attention(sp(self.W_q(Q)), sp(self.W_k(K)), sp(self.W_v(V)))
        return self.W_o(out.transpose(1, 2).reshape(B, Sq, D))
