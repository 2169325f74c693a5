# expect: runtime_error
# Hostile: an exception whose text is a str subclass with a trap in its methods (__contains__ raises), and an output
# whose attribute name raises when hashed: the worker's message code (is it a CUDA error?) must not run the learner's
# methods unguarded; it crashed the worker once. It is the learner's runtime error, its text not shown.
import math
import torch

class Text(str):
    def __contains__(self, other):
        raise Boom()

class Boom(RuntimeError):
    def __str__(self):
        return Text("CUDA error: device-side assert triggered")

ARMED = []
class Key(str):
    def __hash__(self):
        if ARMED:
            raise Boom()
        return str.__hash__(self)

def scaled_dot_product_attention(Q, K, V, mask=None):
    d_k = Q.size(-1)
    scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ V
    out.__dict__[Key("zz")] = 1
    ARMED.append(1)
    return out
