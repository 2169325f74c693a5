# expect: accepted
# alternative: the band from torch.cdist over positions, applied with torch.where
import torch


def sliding_window_attention(Q, K, V, window_size):
    S, D = Q.shape[-2], Q.shape[-1]
    pos = torch.arange(S, device=Q.device, dtype=torch.float32)[:, None]
    band = torch.cdist(pos, pos, p=1) <= window_size
    scores = (Q * D ** -0.5) @ K.mT
    scores = torch.where(band, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    return scores.softmax(dim=-1) @ V
