# expect: wrong_output
# mistake: allocates the output with torch.empty(...) without dtype= and fills it head by head: the copy follows the
# buffer's default float32, so bfloat16/float16 inputs come back as float32
import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    out = torch.empty(B, S, H * n_rep, D, device=x.device)
    for j in range(H * n_rep):
        out[:, :, j] = x[:, :, j // n_rep]
    return out
