"""Hidden cases for repeat_kv."""

from torchcode.grader.cases import Call, Case, case


@case(targets="two KV heads repeated twice: grouped (0, 0, 1, 1), not tiled")
def two_heads_twice(rng):
    return Case(steps=[Call(rng.randn(2, 5, 2, 8), 2)])


@case(targets="three KV heads repeated four times")
def three_heads_four_times(rng):
    return Case(steps=[Call(rng.randn(1, 7, 3, 4), 4)])


@case(targets="n_rep = 1 returns the input unchanged")
def no_repeat(rng):
    return Case(steps=[Call(rng.randn(2, 3, 4, 8), 1)])


@case(targets="one KV head shared by all (MQA), one token")
def mqa_single_token(rng):
    return Case(steps=[Call(rng.randn(3, 1, 1, 16), 8)])


@case(targets="odd sizes: the sequence axis is not the head axis")
def odd_sizes(rng):
    return Case(steps=[Call(rng.randn(2, 3, 5, 7), 3)])
