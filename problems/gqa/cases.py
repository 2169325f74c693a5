"""Hidden cases for gqa."""

import torch

from torchcode.grader.cases import Call, Case, Const, Out, Refill, Same, benchmark, case, training_step

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("batch element", "position", "feature"), "x": ("batch element", "position", "feature")}


def gqa(rng, d_model, num_heads, num_kv_heads, B, S, scale=1.0):
    return Case(init=dict(d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads),
                steps=[Call(rng.randn(B, S, d_model, scale=scale))])


@case(targets="8 query heads sharing 2 KV heads: groups of consecutive heads, not tiled")
def grouped_8_2(rng):
    return gqa(rng, 64, 8, 2, B=2, S=7)


GROUPS = ("query heads 0 and 1 had identical queries but gave different outputs: they form one group and must share "
          "KV head 0 (and heads 2, 3 share KV head 1). Repeat each KV head n_rep times in a row (0, 0, 1, 1), not the "
          "whole set of KV heads (0, 1, 0, 1)")


@case(targets="query heads 0, 1 (and 2, 3) with identical query projections: a group shares one KV head")
def group_shares_kv_head(rng):
    d_model, d_k = 32, 8  # 4 query heads over 2 KV heads
    w_q, b_q = rng.randn(d_model, d_model, scale=d_model ** -0.5), rng.randn(d_model, scale=0.1)
    for h in (1, 3):  # each odd head copies its group's first head
        w_q[h * d_k:(h + 1) * d_k], b_q[h * d_k:(h + 1) * d_k] = w_q[(h - 1) * d_k:h * d_k], b_q[(h - 1) * d_k:h * d_k]
    weights = {"W_q.weight": w_q, "W_q.bias": b_q, "W_o.weight": torch.eye(d_model), "W_o.bias": torch.zeros(d_model)}
    head = [Out(0)[:, :, h * d_k:(h + 1) * d_k] for h in range(4)]  # W_o = I: the output holds each head's result
    return Case(init=dict(d_model=d_model, num_heads=4, num_kv_heads=2), steps=[Call(rng.randn(2, 6, d_model))],
                weights=weights, checks=[Same(head[1], head[0], GROUPS), Same(head[3], head[2], GROUPS)])


@case(targets="num_kv_heads = 1 (multi-query attention), 3 query heads: a group size that is not a power of two")
def mqa(rng):
    return gqa(rng, 36, 3, 1, B=2, S=6)


@case(targets="num_kv_heads = num_heads (plain multi-head attention)")
def mha_extreme(rng):
    return gqa(rng, 32, 4, 4, B=2, S=5)


@case(targets="6 heads over 3 KV heads, odd sequence length: no causal mask")
def grouped_6_3(rng):
    # 65 tokens: one past a whole number of chunks of 2..64 queries or keys, so a chunk count rounded down drops the
    # last one (every position computed, the last one too)
    c = gqa(rng, 48, 6, 3, B=1, S=65)
    c.sibling = dict(d_model=48, num_heads=6, num_kv_heads=1)  # an MQA layer built beside it: nothing on the class
    return c


@case(targets="a longer sequence (77 tokens, a multiple of no tile size): every query row computed, and a softmax "
              "taken over keys in chunks rescales both its running sum and its output")
def long_sequence(rng):
    return gqa(rng, 32, 4, 2, B=1, S=77)


@case(targets="a long sequence (521 tokens, more than four tiles of 128 keys), then large activations: a running "
              "max and sum carried correctly across every key tile, each row rescaled when its own max grows",
      dtypes=("float32",))
def many_key_tiles(rng):
    c = gqa(rng, 16, 4, 2, B=1, S=521, scale=2.0)
    c.steps.append(Call(rng.randn(1, 521, 16, scale=12.0)))  # then large activations: each row's own rescale
    c.grad = False  # forward only: the online softmax's bookkeeping is what it tests
    return c


@case(targets="one token, batch 3")
def single_token(rng):
    return gqa(rng, 32, 8, 2, B=3, S=1)


@case(targets="one layer called with other batch sizes and lengths in turn (a short prompt, then a longer one): "
              "nothing built for one call's shape (an index, a mask, a buffer) may serve another")
def other_shapes_on_one_layer(rng):
    return Case(init=dict(d_model=32, num_heads=8, num_kv_heads=2),
                steps=[Call(rng.randn(2, 6, 32)), Call(rng.randn(2, 11, 32)), Call(rng.randn(3, 5, 32))])


@case(targets="one layer, two inputs of the same shape: nothing computed for one input may serve another")
def same_shape_twice(rng):
    return Case(init=dict(d_model=32, num_heads=4, num_kv_heads=2),
                steps=[Call(rng.randn(2, 5, 32)), Call(rng.randn(2, 5, 32)), Call(rng.randn(2, 5, 32))])


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    c = gqa(rng, 32, 4, 2, B=2, S=9, scale=10.0)
    c.grad = False  # forward stability only: gradients at such scores are ill-conditioned (as sdpa's large_scores)
    return c


@case(targets="one input buffer reused by the caller: the same x object, refilled in place with new values, needs "
              "the new answer (nothing may be kept by the tensor's id() or data_ptr())")
def buffer_refilled(rng):
    return Case(init=dict(d_model=32, num_heads=4, num_kv_heads=2),
                steps=[Call(rng.randn(2, 6, 32)), Call(Refill(0, 0, rng.randn(2, 6, 32)))],
                grad=False)  # x is written into between the calls: a forward property


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a "
              "new x may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    steps = [Call(rng.randn(2, 6, 32)).temporary_inputs() for _ in range(4)]
    return Case(init=dict(d_model=32, num_heads=4, num_kv_heads=2), steps=steps, grad=False)  # inference


@case(targets="the caller changes the weights in place between two calls (an optimizer step): the second call uses "
              "the new ones, nothing computed from the old weights may be kept on self")
def weights_updated_between_calls(rng):
    x = rng.randn(2, 5, 32)
    new = {"W_q.weight": rng.randn(32, 32, scale=32 ** -0.5), "W_k.weight": rng.randn(16, 32, scale=32 ** -0.5),
           "W_v.weight": rng.randn(16, 32, scale=32 ** -0.5), "W_o.weight": rng.randn(32, 32, scale=32 ** -0.5),
           "W_q.bias": rng.randn(32, scale=0.1), "W_k.bias": rng.randn(16, scale=0.1), "W_v.bias": rng.randn(16, scale=0.1),
           "W_o.bias": rng.randn(32, scale=0.1)}  # biases too: a bias joined once and kept is as stale as a weight
    return Case(init=dict(d_model=32, num_heads=4, num_kv_heads=2), steps=[Call(x), Call(x).updated(new)],
                grad=False)  # a training step runs backward before it changes the weights: a forward property


@case(targets="an input that needs no gradient (the first layer of a model, fed embeddings with "
              "requires_grad=False): the weights' gradients are still graded, so autograd may not be switched off "
              "because the input needs none")
def input_needs_no_grad(rng):
    return Case(init=dict(d_model=32, num_heads=4, num_kv_heads=2), steps=[Call(Const(rng.randn(2, 5, 32)))])


@benchmark
def bench_inputs(rng, S):
    return Case(init=dict(d_model=512, num_heads=8, num_kv_heads=2), steps=[Call(rng.randn(1, S, 512))])


@case(targets="a training step (a new nn.Module starts in training mode): backward runs, and over 1024 copies of one input "
              "the mean output is eval mode's (dropout, if you add it, keeps the expectation)")
def training(rng):
    return training_step(dict(d_model=32, num_heads=4, num_kv_heads=2), [(rng.randn(1, 4, 32),)])


@case(targets="a training step on an input that needs no gradient (a trainable layer on frozen embeddings): the "
              "weights still get theirs (torch.utils.checkpoint's use_reentrant=True builds no graph then: "
              "use_reentrant=False)")
def training_input_needs_no_grad(rng):
    return training_step(dict(d_model=32, num_heads=4, num_kv_heads=2), [(rng.randn(1, 4, 32),)], inputs_need_grad=False)
