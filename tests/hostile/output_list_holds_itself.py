# expect: wrong_output
# a returned list that holds itself: a wrong output, not a header too deep for the grader ("malformed")
import torch
def scaled_dot_product_attention(Q, K, V, mask=None):
    l = [Q]
    l.append(l)
    return l
