# expect: runtime_error
# mistake: the |i - j| distance table built once at import for a 2048-token context and sliced [:S, :S]: a longer sequence gets a table too small
import math
import torch

MAX_LEN = 2048
_POS = torch.arange(MAX_LEN)
_DIST = (_POS[:, None] - _POS[None, :]).abs()


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[1], Q.shape[2]
    scores = Q @ K.transpose(1, 2) / math.sqrt(D)  # (B, S, S)
    far = _DIST[:S, :S].to(Q.device) > window_size
    scores = scores.masked_fill(far, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
