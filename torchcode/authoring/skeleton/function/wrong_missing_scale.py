# expect: wrong_answer
# mistake: forgets the 1/sqrt(D) scale
import torch


def ${name}(Q, K, V):
    return torch.softmax(Q @ K.transpose(-2, -1), dim=-1) @ V
