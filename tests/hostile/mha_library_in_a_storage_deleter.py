# expect: forbidden_call
# problem: mha
# Hostile: the forward pass is torch.nn.functional.multi_head_attention_forward (forbidden everywhere but
# minimind), called in the __del__ of a bytearray subclass backing a torch.frombuffer tensor: Tensor.set_ frees
# that storage inside the aten kernel, inside the dispatch guard's handler, where no guard mode is on the stack.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

_job = []


class _Trigger(bytearray):
    def __del__(self):
        if not _job:
            return
        (Q, K, V, wq, bq, wk, bk, wv, bv, wo, bo, h), out = _job.pop()
        d = Q.shape[-1]
        o, _ = F.multi_head_attention_forward(
            Q.transpose(0, 1), K.transpose(0, 1), V.transpose(0, 1), d, h, None, torch.cat([bq, bk, bv]),
            None, None, False, 0.0, wo, bo, training=False, need_weights=True, use_separate_proj_weight=True,
            q_proj_weight=wq, k_proj_weight=wk, v_proj_weight=wv)
        out.copy_(o.transpose(0, 1))


def _honest(Q, K, V, wq, bq, wk, bk, wv, bv, wo, bo, h):
    B, Sq, d = Q.shape
    dk = d // h
    q = F.linear(Q, wq, bq).reshape(B, Sq, h, dk).transpose(1, 2)
    k = F.linear(K, wk, bk).reshape(B, K.shape[1], h, dk).transpose(1, 2)
    v = F.linear(V, wv, bv).reshape(B, V.shape[1], h, dk).transpose(1, 2)
    a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dk), -1) @ v
    return F.linear(a.transpose(1, 2).reshape(B, Sq, d), wo, bo)


class _Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        ctx.save_for_backward(*args[:-1])
        ctx.h = args[-1]
        out = torch.empty_like(args[0])
        _job.append((args, out))
        torch.frombuffer(_Trigger(8), dtype=torch.float32).set_(torch.empty(0))
        return out

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            xs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
            grads = torch.autograd.grad(_honest(*xs, ctx.h), xs, g)
        return (*grads, None)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V):
        return _Fn.apply(Q, K, V, self.W_q.weight, self.W_q.bias, self.W_k.weight, self.W_k.bias,
                         self.W_v.weight, self.W_v.bias, self.W_o.weight, self.W_o.bias, self.h)
