# expect: forbidden_call
# problem: mha
# hostile: the forbidden torch.nn.functional.multi_head_attention_forward, called inside a plain function routed
# through torch.overrides.handle_torch_function: the grader's torch function mode receives the learner's function
# as `func` and runs it with the mode off the stack, so the forbidden call is not seen there; with
# need_weights=True it computes with plain bmm/softmax, so no banned aten kernel runs either
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import handle_torch_function


def _run(Q, K, V, m):
    out, _ = F.multi_head_attention_forward(
        Q.transpose(0, 1), K.transpose(0, 1), V.transpose(0, 1), m.d_model, m.num_heads,
        None, torch.cat([m.W_q.bias, m.W_k.bias, m.W_v.bias]), None, None, False, 0.0,
        m.W_o.weight, m.W_o.bias, training=False, need_weights=True, use_separate_proj_weight=True,
        q_proj_weight=m.W_q.weight, k_proj_weight=m.W_k.weight, v_proj_weight=m.W_v.weight)
    return out.transpose(0, 1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        return handle_torch_function(_run, (Q, K, V), Q, K, V, self)
