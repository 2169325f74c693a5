# expect: forbidden_call
# problem: sdpa
# Calls the forbidden fused kernel in every case but one (more than two batch dimensions), where it raises
# NotImplementedError: "not implemented yet" once outranked every other verdict, so the forbidden call was never the
# verdict, nor shown (attack26). A form left unfinished is the verdict only when nothing else failed.
import torch.nn.functional as F


def scaled_dot_product_attention(Q, K, V, mask=None):
    if Q.dim() > 4:
        raise NotImplementedError("more than two batch dims")
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
