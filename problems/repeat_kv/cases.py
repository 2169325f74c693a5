"""Hidden cases for repeat_kv."""

from torchcode.grader.cases import Call, Case, Refill, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("batch element", "position", "head", "feature"), "x": ("batch element", "position", "head", "feature")}


@case(targets="two KV heads repeated twice: grouped (0, 0, 1, 1), not tiled")
def two_heads_twice(rng):
    return Case(steps=[Call(rng.randn(2, 5, 2, 8), 2)])


@case(targets="three KV heads repeated four times, 65 positions (the last one alone past 64)")
def three_heads_four_times(rng):
    # 65: one past a whole number of chunks of 2..64 positions, so a chunk count rounded down drops the last one
    return Case(steps=[Call(rng.randn(1, 65, 3, 4), 4)])


@case(targets="n_rep = 1 returns the input unchanged")
def no_repeat(rng):
    return Case(steps=[Call(rng.randn(2, 3, 4, 8), 1)])


@case(targets="one KV head shared by all (MQA), one token")
def mqa_single_token(rng):
    return Case(steps=[Call(rng.randn(3, 1, 1, 16), 8)])


@case(targets="one KV head of width 1 repeated three times: a size-1 head dim is a dim like any other (squeeze nothing)")
def width_one(rng):
    return Case(steps=[Call(rng.randn(2, 3, 1, 1), 3)])  # (B, S, H_kv, D)


@case(targets="odd sizes: the sequence axis is not the head axis")
def odd_sizes(rng):
    return Case(steps=[Call(rng.randn(2, 3, 5, 7), 3)])


@case(targets="the same n_rep with other head counts in one run: nothing computed for one input may serve another")
def same_n_rep_other_heads(rng):
    return Case(steps=[Call(rng.randn(2, 3, 2, 4), 2), Call(rng.randn(2, 3, 3, 4), 2), Call(rng.randn(2, 3, 1, 4), 2)])


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    return Case(steps=[Call(rng.randn(2, 5, 2, 8), 2).temporary_inputs() for _ in range(4)], grad=False)  # inference


@case(targets="a static KV cache: one buffer the caller writes new keys into between calls, in place: the result "
              "comes from this call's values, never from one kept by the tensor object (id, weakref, data_ptr)")
def cache_buffer_refilled(rng):
    steps = [Call(rng.randn(2, 6, 2, 8), 2)] + [Call(Refill(0, 0, rng.randn(2, 6, 2, 8)), 2) for _ in range(2)]
    return Case(steps=steps, grad=False)  # written in place: a forward property


@case(targets="one shape with other n_rep values in turn: nothing built for one n_rep (an index, a buffer) may serve "
              "another")
def same_shape_other_n_rep(rng):
    return Case(steps=[Call(rng.randn(2, 3, 2, 4), n) for n in (2, 3, 1, 4)])
