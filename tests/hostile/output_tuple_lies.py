# expect: wrong_output
# an output tuple whose __getitem__ raises and whose __len__ lies: never called by the grader
import torch
class Lie(tuple):
    def __getitem__(self, i):
        raise ValueError("no")
    def __len__(self):
        return 7
def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return Lie((torch.softmax(s, -1) @ V,))
