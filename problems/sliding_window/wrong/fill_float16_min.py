# expect: wrong_answer
# mistake: fills out-of-window scores with torch.finfo(torch.float16).min (-65504, "safe in half precision") in
# every dtype: in float32 or bfloat16 a query whose in-window scores are all below -65504 looks outside its window
import math

import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2:]
    i = torch.arange(S, device=Q.device)
    outside = (i[:, None] - i[None, :]).abs() > window_size
    scores = (Q @ K.transpose(-2, -1) / math.sqrt(D)).masked_fill(outside, torch.finfo(torch.float16).min)
    return torch.softmax(scores, dim=-1) @ V
