"""Hidden cases for gqa."""

from torchcode.grader.cases import Call, Case, benchmark, case


def gqa(rng, d_model, num_heads, num_kv_heads, B, S, scale=1.0):
    return Case(init=dict(d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads),
                steps=[Call(rng.randn(B, S, d_model, scale=scale))])


@case(targets="8 query heads sharing 2 KV heads: groups of consecutive heads, not tiled")
def grouped_8_2(rng):
    return gqa(rng, 64, 8, 2, B=2, S=7)


@case(targets="num_kv_heads = 1 (multi-query attention), 3 query heads: a group size that is not a power of two")
def mqa(rng):
    return gqa(rng, 36, 3, 1, B=2, S=6)


@case(targets="num_kv_heads = num_heads (plain multi-head attention)")
def mha_extreme(rng):
    return gqa(rng, 32, 4, 4, B=2, S=5)


@case(targets="6 heads over 3 KV heads, odd sequence length: no causal mask")
def grouped_6_3(rng):
    return gqa(rng, 48, 6, 3, B=1, S=11)


@case(targets="one token, batch 3")
def single_token(rng):
    return gqa(rng, 32, 8, 2, B=3, S=1)


@case(targets="one layer, two inputs of the same shape: nothing computed for one input may serve another")
def same_shape_twice(rng):
    return Case(init=dict(d_model=32, num_heads=4, num_kv_heads=2),
                steps=[Call(rng.randn(2, 5, 32)), Call(rng.randn(2, 5, 32)), Call(rng.randn(2, 5, 32))])


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    return gqa(rng, 32, 4, 2, B=2, S=9, scale=10.0)


@benchmark
def bench_inputs(rng, S):
    return Case(init=dict(d_model=512, num_heads=8, num_kv_heads=2), steps=[Call(rng.randn(1, S, 512))])
