# expect: accepted
# Leaves 1100 folders nested one in the next in its scratch directory (within the 2000 files it may leave):
# removing the scratch directory afterwards recursed once per level, past Python's recursion limit, and the
# check ended with a RecursionError traceback and its temporary directory left behind. The answer is right:
# accepted, with nothing left behind.
import math
import os

import torch

_top = os.getcwd()
for _ in range(1100):
    os.mkdir("d")
    os.chdir("d")
os.chdir(_top)


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1) @ V
