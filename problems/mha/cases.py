"""Hidden cases for mha."""

from torchcode.grader.cases import Call, Case, Fn, Out, Same, case

SAME_INPUTS = ("the same inputs twice on one layer gave different outputs: nothing random at evaluation (F.dropout "
               "needs training=self.training, or use nn.Dropout), and nothing carried over from the call in between")
OTHER_KV = ("a second call with the same queries but other keys/values gave the same output as the first: project "
            "this call's K and V, and keep nothing computed from one call on self for the next")


def differs(a, b):
    """1.0 if two outputs are not identical, else 0.0."""
    return ((a - b).abs().amax() > 0).to(a.dtype)


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


@case(targets="one layer, other keys/values of the same shape, then the first inputs again: nothing kept on self")
def same_shapes_other_values(rng):
    x, kv1, kv2 = rng.randn(2, 5, 32), rng.randn(2, 7, 32), rng.randn(2, 7, 32)
    one = Fn(lambda a: a.new_ones(()), Out(0))
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, kv1, kv1), Call(x, kv2, kv2), Call(x, kv1, kv1)],
                checks=[Same(Out(2), Out(0), SAME_INPUTS), Same(Fn(differs, Out(1), Out(0)), one, OTHER_KV)])
