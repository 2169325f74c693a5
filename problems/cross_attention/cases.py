"""Hidden cases for cross_attention."""

import torch

from torchcode.grader.cases import Alias, Call, Case, Const, Fn, Out, Refill, Same, case, differs, training_step

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("batch element", "query position", "feature"), "x_q": ("batch element", "query position", "feature"),
        "x_kv": ("batch element", "memory position", "feature")}

OTHER_MEMORY = ("a second call with the same queries and another memory x_kv gave the same output as the first: "
                "project keys and values from this call's x_kv; keep no keys/values of an earlier memory on self")
SAME_INPUTS = ("the same x_q and x_kv twice on one layer gave different outputs: keep nothing random at evaluation "
               "and nothing from the call in between")


HEADS = ("changing only head 1's part of the memory x_kv (features 8..15, every projection the identity) "
         "changed other heads' outputs: head h owns features h * d_k to (h + 1) * d_k - 1 of each position. "
         "Split each position's features into heads before moving the head dim in front of the sequence, and "
         "merge back in the reverse order")


ONE = ("with every value the same vector (W_v = 0, its bias b; W_o = I), your output was not b at every query: each "
       "query's weights must sum to 1 over the keys (the softmax over the last dim of the (..., queries, keys) "
       "scores), and each head's result must land in its own features")


def identity_projections(d_model: int) -> dict:
    """Every projection the identity: head h's output is exactly what head h's features gave (W_o = I too)."""
    eye, zero = torch.eye(d_model), torch.zeros(d_model)
    return {f"{w}.{p}": (eye if p == "weight" else zero) for w in ("W_q", "W_k", "W_v", "W_o") for p in ("weight", "bias")}



def cross(rng, d_model, num_heads, B, Sq, Skv, scale=1.0):
    return Case(init=dict(d_model=d_model, num_heads=num_heads),
                steps=[Call(rng.randn(B, Sq, d_model, scale=scale), rng.randn(B, Skv, d_model, scale=scale))])


@case(targets="short decoder, longer encoder (65 memory tokens): keys and values come from x_kv, every memory token "
              "counts, the last one too (alone past 64)")
def decoder_reads_encoder(rng):
    # 65: one past a whole number of memory tiles of 2..64, so a tile count rounded down drops the last memory token
    return cross(rng, 32, 4, B=2, Sq=3, Skv=65)


@case(targets="one head: the head dim is 1 and d_k is d_model (squeeze nothing you did not make)")
def one_head(rng):
    return cross(rng, 16, 1, B=2, Sq=3, Skv=5)


@case(targets="queries longer than the memory (65 queries): every query row computed, the last one too (alone past 64)")
def more_queries(rng):
    # 65: one past a whole number of query chunks of 2..64, so a chunk count rounded down drops the last query
    return cross(rng, 32, 4, B=2, Sq=65, Skv=4)


@case(targets="a long encoder memory (147 tokens, a multiple of no tile size): every memory token counts, and a "
              "softmax taken over the memory in chunks rescales both its running sum and its output")
def long_memory(rng):
    return cross(rng, 32, 4, B=1, Sq=5, Skv=147)


@case(targets="a memory of 600 tokens (more than four tiles of 128, two of 256), then large activations over it: a "
              "running max and sum carried across tiles, each row rescaled when its own max grows", dtypes=("float32",))
def many_memory_tiles(rng):
    steps = [Call(rng.randn(1, 4, 32), rng.randn(1, 600, 32)),
             Call(rng.randn(1, 4, 32, scale=12.0), rng.randn(1, 600, 32, scale=12.0))]
    return Case(init=dict(d_model=32, num_heads=2), steps=steps, grad=False)  # forward only


@case(targets="8 narrow heads: scale by sqrt(d_k); another layer with 2 heads is built beside it (a model builds all its "
              "layers first): each layer keeps its own settings on self, not on the class")
def many_heads(rng):
    c = cross(rng, 48, 8, B=1, Sq=5, Skv=7)
    c.sibling = dict(d_model=48, num_heads=2)
    return c


@case(targets="equal lengths (a self-attention-shaped call)")
def equal_lengths(rng):
    return cross(rng, 24, 3, B=3, Sq=6, Skv=6)


@case(targets="one tensor object passed as x_q and x_kv (layer(x, x)): still plain, unmasked attention over every "
              "position, no shortcut for self-attention"
              "; then equal values in distinct tensors: each input needs its own gradient (never reuse one for "
              "another because their values are equal)")
def query_is_memory(rng):
    w = rng.randn(2, 4, 24)  # then equal values in two tensors: each needs its own gradient
    return Case(init=dict(d_model=24, num_heads=3), steps=[Call(rng.randn(2, 5, 24), Alias(0, 0)), Call(w, w.clone())])


@case(targets="one query token, one memory token")
def single_tokens(rng):
    return cross(rng, 16, 2, B=2, Sq=1, Skv=1)


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    c = cross(rng, 32, 2, B=2, Sq=4, Skv=6, scale=12.0)
    c.grad = False  # forward stability only: gradients at such scores are ill-conditioned (as sdpa's large_scores)
    return c


@case(targets="large activations and one query token (a decoding step over the encoder's memory): the same stable "
              "softmax on a single-query path")
def single_query_large_inputs(rng):
    c = cross(rng, 32, 2, B=2, Sq=1, Skv=6, scale=12.0)
    c.grad = False  # forward stability only: gradients at such scores are ill-conditioned (as sdpa's large_scores)
    return c


@case(targets="batch elements are independent: each query reads only its own sentence's memory")
def batch_elements_independent(rng):
    x, mem = rng.randn(2, 3, 32), rng.randn(2, 5, 32)
    mem2 = mem.clone()
    mem2[1] = rng.randn(5, 32)  # only batch element 1's memory changes
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, mem), Call(x, mem2)], checks=[Same(
        Out(1)[0], Out(0)[0], "changing the memory of batch element 1 changed the output of batch element 0: "
        "attend within each batch element (keep the batch dim apart from the token dim when you reshape)")])


@case(targets="one layer called with other batch sizes, query lengths and memory lengths in turn: nothing built for "
              "one call's shape (an index, a mask, a buffer) may serve another")
def other_shapes_on_one_layer(rng):
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(rng.randn(2, 3, 32), rng.randn(2, 5, 32)),
                                                           Call(rng.randn(2, 6, 32), rng.randn(2, 9, 32)),
                                                           Call(rng.randn(1, 2, 32), rng.randn(1, 4, 32))])


@case(targets="one layer, two memories of the same shape (two source sentences): keys/values from this call's x_kv")
def memories_share_shapes(rng):
    x, mem1, mem2 = rng.randn(2, 4, 32), rng.randn(2, 6, 32), rng.randn(2, 6, 32)
    one = Fn(lambda a: a.new_ones(()), Out(0))
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, mem1), Call(x, mem2), Call(x, mem1)],
                checks=[Same(Out(2), Out(0), SAME_INPUTS), Same(Fn(differs, Out(1), Out(0)), one, OTHER_MEMORY)])


@case(targets="identity projections: head 1 reads only its own features (8..15) of the memory")
def heads_are_separate(rng):
    x_q, x_kv = rng.randn(2, 3, 32), rng.randn(2, 7, 32)
    x_kv2 = x_kv.clone()
    x_kv2[..., 8:16] = rng.randn(2, 7, 8)  # head 1's features only
    others = [slice(0, 8), slice(16, 32)]
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x_q, x_kv), Call(x_q, x_kv2)],
                weights=identity_projections(32),
                checks=[Same(Out(1)[:, :, f], Out(0)[:, :, f], HEADS) for f in others])


@case(targets="every value the same vector (W_v = 0, W_o = I): each query's weights sum to 1, so every output row is it")
def weights_sum_to_one(rng):
    x, b = rng.randn(2, 6, 32), rng.randn(32)
    weights = identity_projections(32)
    weights.update({"W_v.weight": torch.zeros(32, 32), "W_v.bias": b})
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(rng.randn(2, 4, 32), x)], weights=weights, grad=False,
                checks=[Same(Out(0), Fn(lambda o: b.to(o.dtype).expand_as(o), Out(0)), ONE)])


@case(targets="a decoding loop under torch.no_grad() that builds every tensor afresh and frees it after each step: "
              "a new memory may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def memories_freed_between_steps(rng):
    steps = [Call(rng.randn(2, 1, 32), rng.randn(2, 6, 32)).temporary_inputs() for _ in range(4)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # inference: forward only


@case(targets="decoding steps over one memory tensor: the same x_kv object again (keys and values may be reused), "
              "then refilled in place with a new memory, then the weights changed in place (an optimizer step): "
              "keys and values kept by the memory's id() or computed with old weights are stale")
def memory_object_reused(rng):
    mem, mem2 = rng.randn(2, 6, 32), rng.randn(2, 6, 32)
    new = {f"{w}.weight": rng.randn(32, 32, scale=32 ** -0.5) for w in ("W_q", "W_k", "W_v", "W_o")}
    new.update({f"{w}.bias": rng.randn(32, scale=0.1) for w in ("W_q", "W_k", "W_v", "W_o")})  # biases kept: stale too
    steps = [Call(rng.randn(2, 1, 32), mem), Call(rng.randn(2, 1, 32), Alias(0, 1)),
             Call(rng.randn(2, 1, 32), Refill(0, 1, mem2)), Call(rng.randn(2, 1, 32), Alias(0, 1)).updated(new)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps,
                grad=False)  # the memory is written into between calls, the weights changed: a forward property


@case(targets="one memory token for several queries: every query reads it, the output keeps every query's row")
def single_memory_token(rng):
    return cross(rng, 32, 4, B=2, Sq=4, Skv=1)


@case(targets="one query buffer the caller refills in place between calls (over one memory): the output comes from "
              "this call's queries, never from projections kept by the tensor object")
def queries_refilled(rng):
    mem = rng.randn(2, 6, 32)
    steps = [Call(rng.randn(2, 3, 32), mem)] + [Call(Refill(0, 0, rng.randn(2, 3, 32)), Alias(0, 1)) for _ in range(2)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # written in place: a forward property


@case(targets="x_q is x_kv (layer(x, x)) under torch.no_grad(), the weights changed in place between two calls: a fused "
              "projection kept for that path is stale")
def query_is_memory_weights_updated_inference(rng):
    new = {f"{w}.weight": rng.randn(32, 32, scale=32 ** -0.5) for w in ("W_q", "W_k", "W_v", "W_o")}
    steps = [Call(rng.randn(2, 5, 32), Alias(0, 0)), Call(rng.randn(2, 5, 32), Alias(1, 0)).updated(new)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # inference


@case(targets="an input that needs no gradient (the first layer of a model, fed embeddings with "
              "requires_grad=False): the weights' gradients are still graded, so autograd may not be switched off "
              "because the input needs none")
def inputs_need_no_grad(rng):
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(Const(rng.randn(2, 3, 32)), Const(rng.randn(2, 6, 32)))])


@case(targets="a training step (a new nn.Module starts in training mode): backward runs, and over 1024 copies of one input "
              "the mean output is eval mode's (dropout, if you add it, keeps the expectation)")
def training(rng):
    return training_step(dict(d_model=32, num_heads=4), [(rng.randn(1, 3, 32), rng.randn(1, 4, 32))])


@case(targets="a training step on inputs that need no gradient (a trainable layer on frozen embeddings): the weights "
              "still get theirs (torch.utils.checkpoint's use_reentrant=True builds no graph then: use_reentrant=False)")
def training_inputs_need_no_grad(rng):
    return training_step(dict(d_model=32, num_heads=4), [(rng.randn(1, 3, 32), rng.randn(1, 4, 32))],
                         inputs_need_grad=False)
