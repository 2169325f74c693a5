"""Hidden cases for mha."""

from torchcode.grader.cases import Call, Case, case


def mha(d_model, num_heads, *calls):
    return Case(init=dict(d_model=d_model, num_heads=num_heads), steps=[Call(*c) for c in calls])


@case(targets="self-attention, 4 heads: split, attend, merge, project out")
def self_attention(rng):
    x = rng.randn(2, 6, 32)
    return mha(32, 4, (x, x, x))


@case(targets="Sq != Sk: keys and values split with their own length")
def different_lengths(rng):
    return mha(32, 4, (rng.randn(2, 5, 32), rng.randn(2, 9, 32), rng.randn(2, 9, 32)))


@case(targets="8 narrow heads (d_k = 6): scale by sqrt(d_k), transpose before merging")
def many_heads(rng):
    return mha(48, 8, (rng.randn(3, 7, 48), rng.randn(3, 7, 48), rng.randn(3, 7, 48)))


@case(targets="a single head equals plain attention with projections")
def one_head(rng):
    return mha(16, 1, (rng.randn(2, 4, 16), rng.randn(2, 6, 16), rng.randn(2, 6, 16)))


@case(targets="batch 1, one query token")
def single_token(rng):
    return mha(24, 3, (rng.randn(1, 1, 24), rng.randn(1, 5, 24), rng.randn(1, 5, 24)))


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    x = rng.randn(2, 8, 32, scale=12.0)
    return mha(32, 2, (x, x, x))
