# expect: runtime_error
# mistake: the causal mask built once at import for a 2048-token context (as a model's buffer) and sliced [:S, :S]: any longer sequence fails
import torch

MAX_LEN = 2048
_MASK = torch.ones(MAX_LEN, MAX_LEN, dtype=torch.bool).tril()  # (MAX_LEN, MAX_LEN): key j <= query i


def causal_attention(Q, K, V):
    # Q, K, V: (B, S, D)
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / D**0.5  # (B, S, S)
    allowed = _MASK[:S, :S].to(Q.device)
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ V
