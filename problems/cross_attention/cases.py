"""Hidden cases for cross_attention."""

from torchcode.grader.cases import Call, Case, case


def cross(rng, d_model, num_heads, B, Sq, Skv, scale=1.0):
    return Case(init=dict(d_model=d_model, num_heads=num_heads),
                steps=[Call(rng.randn(B, Sq, d_model, scale=scale), rng.randn(B, Skv, d_model, scale=scale))])


@case(targets="short decoder, longer encoder: keys and values come from x_kv")
def decoder_reads_encoder(rng):
    return cross(rng, 32, 4, B=2, Sq=3, Skv=10)


@case(targets="queries longer than the memory")
def more_queries(rng):
    return cross(rng, 32, 4, B=2, Sq=9, Skv=4)


@case(targets="8 narrow heads: scale by sqrt(d_k)")
def many_heads(rng):
    return cross(rng, 48, 8, B=1, Sq=5, Skv=7)


@case(targets="equal lengths (a self-attention-shaped call)")
def equal_lengths(rng):
    return cross(rng, 24, 3, B=3, Sq=6, Skv=6)


@case(targets="one query token, one memory token")
def single_tokens(rng):
    return cross(rng, 16, 2, B=2, Sq=1, Skv=1)


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    return cross(rng, 32, 2, B=2, Sq=4, Skv=6, scale=12.0)
