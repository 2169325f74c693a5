"""Hidden cases for mha."""

import torch

from torchcode.grader.cases import Alias, Call, Case, Const, Fn, Out, Refill, Same, case, differs, training_step

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("batch element", "query position", "feature"), "Q": ("batch element", "query position", "feature"),
        "K": ("batch element", "key position", "feature"), "V": ("batch element", "key position", "feature")}

SAME_INPUTS = ("the same inputs twice on one layer gave different outputs: nothing random at evaluation (F.dropout "
               "needs training=self.training, or use nn.Dropout), and nothing carried over from the call in between")
OTHER_KV = ("a second call with the same queries but other keys/values gave the same output as the first: project "
            "this call's K and V, and keep nothing computed from one call on self for the next")


HEADS = ("changing only head 1's part of the keys and values (features 8..15, every projection the identity) "
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



def mha(d_model, num_heads, *calls):
    return Case(init=dict(d_model=d_model, num_heads=num_heads), steps=[Call(*c) for c in calls])


@case(targets="self-attention, 4 heads: split, attend, merge, project out; one tensor object passed as Q, K and V "
              "(layer(x, x, x), as callers write it): a shortcut taken when Q is K is V is graded here")
def self_attention(rng):
    x = rng.randn(2, 6, 32)
    return mha(32, 4, (x, Alias(0, 0), Alias(0, 0)))


@case(targets="one tensor object passed as Q and K, another as V (layer(x, x, y)): a shortcut for Q is K must not "
              "assume V is the same object too; then equal values in distinct tensors: each input needs its own "
              "gradient (never reuse one for another because their values are equal)")
def query_is_key_not_value(rng):
    x, w = rng.randn(2, 6, 32), rng.randn(2, 4, 32)  # then equal values in three tensors: each its own gradient
    return mha(32, 4, (x, Alias(0, 0), rng.randn(2, 6, 32)), (w, w.clone(), w.clone()))


@case(targets="Sq != Sk (65 queries, 33 keys): keys and values split with their own length; every query row "
              "computed, the last one too (alone past 64)")
def different_lengths(rng):
    # 65 and 33: one past a whole number of chunks of 2..64 queries (2..32 keys): a chunk count rounded down drops one
    return mha(32, 4, (rng.randn(2, 65, 32), rng.randn(2, 33, 32), rng.randn(2, 33, 32)))


@case(targets="8 narrow heads (d_k = 6): scale by sqrt(d_k), transpose before merging; a 2-head layer is built beside "
              "it (as in a model), so head counts kept on the class, not on self, are the other layer's")
def many_heads(rng):
    c = mha(48, 8, (rng.randn(3, 7, 48), rng.randn(3, 7, 48), rng.randn(3, 7, 48)))
    c.sibling = dict(d_model=48, num_heads=2)
    return c


@case(targets="a single head equals plain attention with projections; 65 keys, the last one alone past 64")
def one_head(rng):
    # 65 keys: one past a whole number of key tiles of 2..64, so a tile count rounded down drops the last key
    return mha(16, 1, (rng.randn(2, 4, 16), rng.randn(2, 65, 16), rng.randn(2, 65, 16)))


@case(targets="one query token: batch 1, then a batch of 3 (a decoding step per sequence, each with its own query)")
def single_token(rng):
    return mha(24, 3, (rng.randn(1, 1, 24), rng.randn(1, 5, 24), rng.randn(1, 5, 24)),
               (rng.randn(3, 1, 24), rng.randn(3, 5, 24), rng.randn(3, 5, 24)))


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    x = rng.randn(2, 8, 32, scale=12.0)
    c = mha(32, 2, (x, x, x))
    c.grad = False  # forward stability only: gradients at such scores are ill-conditioned (as sdpa's large_scores)
    return c


@case(targets="600 keys (more than four tiles of 128, two of 256), then large activations over them: a running max "
              "and sum carried across tiles, each row rescaled whenever its own max grows, whatever the other rows do",
      dtypes=("float32",))
def large_inputs_many_keys(rng):
    c = mha(32, 2, (rng.randn(2, 4, 32), rng.randn(2, 600, 32), rng.randn(2, 600, 32)),
            (rng.randn(2, 4, 32, scale=12.0), rng.randn(2, 600, 32, scale=12.0), rng.randn(2, 600, 32)))
    c.grad = False  # forward stability only: gradients at such scores are ill-conditioned (as sdpa's large_scores)
    return c


@case(targets="large activations and one query token (a decoding step): the same stable softmax on a single-query "
              "path")
def single_query_large_inputs(rng):
    c = mha(32, 2, (rng.randn(2, 1, 32, scale=12.0), rng.randn(2, 7, 32, scale=12.0), rng.randn(2, 7, 32, scale=12.0)))
    c.grad = False  # forward stability only: gradients at such scores are ill-conditioned (as sdpa's large_scores)
    return c


@case(targets="one layer, other keys/values of the same shape, then the first inputs again: nothing kept on self; "
              "each call passes one memory tensor object as K and V (layer(q, mem, mem)), so a shortcut taken when K is "
              "V is graded here")
def same_shapes_other_values(rng):
    x, kv1, kv2 = rng.randn(2, 5, 32), rng.randn(2, 7, 32), rng.randn(2, 7, 32)
    one = Fn(lambda a: a.new_ones(()), Out(0))
    return Case(init=dict(d_model=32, num_heads=4),
                steps=[Call(x, kv1, Alias(0, 1)), Call(x, kv2, Alias(1, 1)), Call(x, kv1, Alias(2, 1))],
                checks=[Same(Out(2), Out(0), SAME_INPUTS), Same(Fn(differs, Out(1), Out(0)), one, OTHER_KV)])


@case(targets="identity projections: head 1 reads only its own features (8..15) of each position")
def heads_are_separate(rng):
    Q, K, V = rng.randn(2, 5, 32), rng.randn(2, 6, 32), rng.randn(2, 6, 32)
    K2, V2 = K.clone(), V.clone()
    K2[..., 8:16], V2[..., 8:16] = rng.randn(2, 6, 8), rng.randn(2, 6, 8)  # head 1's features only
    others = [slice(0, 8), slice(16, 32)]
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(Q, K, V), Call(Q, K2, V2)],
                weights=identity_projections(32),
                checks=[Same(Out(1)[:, :, f], Out(0)[:, :, f], HEADS) for f in others])


@case(targets="every value the same vector (W_v = 0, W_o = I): each query's weights sum to 1, so every output row is it")
def weights_sum_to_one(rng):
    x, b = rng.randn(2, 6, 32), rng.randn(32)
    weights = identity_projections(32)
    weights.update({"W_v.weight": torch.zeros(32, 32), "W_v.bias": b})
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, x, x)], weights=weights, grad=False,
                checks=[Same(Out(0), Fn(lambda o: b.to(o.dtype).expand_as(o), Out(0)), ONE)])


@case(targets="an inference loop under torch.no_grad() that builds each query and memory afresh and frees them "
              "after the call (layer(q, mem, mem)): a new tensor may get a freed one's id() (and ._version 0 again), "
              "so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    steps = [Call(rng.randn(2, 3, 32), rng.randn(2, 5, 32), Alias(i, 1)).temporary_inputs() for i in range(4)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # inference


@case(targets="the caller changes the weights in place between two calls (an optimizer step): the second call uses "
              "the new ones, nothing computed from the old weights may be kept on self")
def weights_updated_between_calls(rng):
    x, kv = rng.randn(2, 5, 32), rng.randn(2, 7, 32)
    new = {f"{w}.weight": rng.randn(32, 32, scale=32 ** -0.5) for w in ("W_q", "W_k", "W_v", "W_o")}
    new.update({f"{w}.bias": rng.randn(32, scale=0.1) for w in ("W_q", "W_k", "W_v", "W_o")})
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, kv, Alias(0, 1)), Call(x, kv, Alias(1, 1)).updated(new)],
                grad=False)  # a training step runs backward before it changes the weights: a forward property


@case(targets="query, key and value buffers the caller refills in place between calls: the output comes from this "
              "call's values, never from a result kept by the tensor objects (id, weakref, data_ptr)")
def inputs_refilled(rng):
    steps = [Call(rng.randn(2, 5, 32), rng.randn(2, 7, 32), rng.randn(2, 7, 32))]
    steps += [Call(Refill(0, 0, rng.randn(2, 5, 32)), Refill(0, 1, rng.randn(2, 7, 32)), Refill(0, 2, rng.randn(2, 7, 32)))
              for _ in range(2)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # written in place: a forward property


@case(targets="one key and value for several queries (a memory of one token): every query reads it, the output keeps "
              "every query's row")
def single_key(rng):
    return mha(32, 4, (rng.randn(2, 4, 32), rng.randn(2, 1, 32), rng.randn(2, 1, 32)))


@case(targets="self-attention (layer(x, x, x)) under torch.no_grad(), the weights changed in place between two calls: "
              "a fused projection kept for the self-attention path is stale")
def self_attention_weights_updated_inference(rng):
    new = {f"{w}.weight": rng.randn(32, 32, scale=32 ** -0.5) for w in ("W_q", "W_k", "W_v", "W_o")}
    steps = [Call(rng.randn(2, 5, 32), Alias(0, 0), Alias(0, 0)),
             Call(rng.randn(2, 5, 32), Alias(1, 0), Alias(1, 0)).updated(new)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # inference


@case(targets="an input that needs no gradient (the first layer of a model, fed embeddings with "
              "requires_grad=False): the weights' gradients are still graded, so autograd may not be switched off "
              "because the input needs none")
def inputs_need_no_grad(rng):
    return mha(32, 4, (Const(rng.randn(2, 5, 32)), Const(rng.randn(2, 6, 32)), Const(rng.randn(2, 6, 32))))


@case(targets="a training step (a new nn.Module starts in training mode): backward runs, and over 1024 copies of one input "
              "the mean output is eval mode's (dropout, if you add it, keeps the expectation)")
def training(rng):
    q, kv = rng.randn(1, 3, 32), rng.randn(1, 4, 32)
    return training_step(dict(d_model=32, num_heads=4), [(q, kv, kv)])


@case(targets="a training step on inputs that need no gradient (a trainable layer on frozen embeddings): the weights "
              "still get theirs (torch.utils.checkpoint's use_reentrant=True builds no graph then: use_reentrant=False)")
def training_inputs_need_no_grad(rng):
    q, kv = rng.randn(1, 3, 32), rng.randn(1, 4, 32)
    return training_step(dict(d_model=32, num_heads=4), [(q, kv, kv)], inputs_need_grad=False)
