# expect: runtime_error
# problem: sdpa
# A custom autograd.Function whose backward returns its gradients as sparse COO tensors (as nn.Embedding(sparse=True)
# does): Q.grad, K.grad, V.grad arrive sparse. The forward is right. The worker once died encoding them ("Crashed:
# exited with code 0"); a sparse gradient is the learner's output, judged as such: a wrong output where the inputs are
# leaves, and where they are an earlier layer's output (half the cases), an error in backward (that layer's view
# takes dense gradients only), which says to return dense tensors.
import math

import torch


class _Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, mask):
        s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s, dim=-1)
        ctx.save_for_backward(Q, K, V, p)
        return p @ V

    @staticmethod
    def backward(ctx, g):
        Q, K, V, p = ctx.saved_tensors
        dV = p.transpose(-2, -1) @ g
        dp = g @ V.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) / math.sqrt(Q.shape[-1])
        dQ = ds @ K
        dK = ds.transpose(-2, -1) @ Q
        return dQ.to_sparse(), dK.to_sparse(), dV.to_sparse(), None


def scaled_dot_product_attention(Q, K, V, mask=None):
    return _Attn.apply(Q, K, V, mask)
