# expect: wrong_answer
# mistake: "the window holds 2w+1 tokens, so if 2w+1 >= S it covers the whole sequence" -> full attention;
# but position 0 only sees 0..w, so e.g. S=8, w=4 wrongly lets 0 see 5..7
import math
import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(D)
    if 2 * window_size + 1 < S:
        i = torch.arange(S, device=Q.device)
        band = (i[:, None] - i[None, :]).abs() <= window_size
        scores = scores.masked_fill(~band, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V
