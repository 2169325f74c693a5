"""Hidden cases for kv_cache."""

import torch

from torchcode.grader.cases import Call, Case, Cat, Const, Out, Prev, Refill, Same, case, training_step

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output[0]": ("batch element", "position", "feature"), "output[1]": ("batch element", "head", "position", "feature"),
        "x": ("batch element", "position", "feature"), "cache": ("batch element", "head", "position", "feature")}

MATCH_FULL = ("generating with your cache gave different outputs than one full forward over the same tokens: "
              "check the mask offset (new token t is at position S_past + t) and what you concatenate")
CACHE_FULL = "the cache after the last call differs from the keys/values of one full forward: append new keys after the cached ones"

OWN_CACHE = ("a call continued from a cache gave other outputs than one full forward over that cache's tokens and the "
             "new ones: attend over the cache you are handed (the caller may branch or interleave sequences, or continue "
             "on another layer with the same weights), and keep no history of earlier calls on self")


def chunks_then_full(rng, d_model, heads, B, sizes, x=None, weights=None):
    """Calls on consecutive chunks of one sequence (each reusing the previous cache), then one full call."""
    S = sum(sizes)
    x = rng.randn(B, S, d_model) if x is None else x
    steps, start = [], 0
    for i, n in enumerate(sizes):
        steps.append(Call(x[:, start:start + n], Prev(i - 1, 1) if i else None))
        start += n
    steps.append(Call(x))
    last = len(sizes) - 1
    full = len(sizes)
    return Case(init=dict(d_model=d_model, num_heads=heads), steps=steps, weights=weights, checks=[
        Same(Cat([Out(i, 0) for i in range(len(sizes))], dim=1), Out(full, 0), MATCH_FULL),
        Same(Out(last, 1, 0), Out(full, 1, 0), CACHE_FULL),
        Same(Out(last, 1, 1), Out(full, 1, 1), CACHE_FULL),
    ])


@case(targets="prefill without a cache: causal, returns (out, (k, v))")
def prefill(rng):
    x = rng.randn(2, 7, 32)
    x2 = x.clone()
    x2[:, 4:] = rng.randn(2, 3, 32)
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x), Call(x2)], checks=[Same(
        Out(1, 0)[:, :4], Out(0, 0)[:, :4],
        "changing tokens after position 3 changed your outputs at positions 0..3: mask the future")])


@case(targets="prefill 4, then 3 single-token decode steps == one full forward; another layer with 2 heads is built "
              "beside it (a model builds all its layers first): each layer keeps its own settings on self, not on the class")
def prefill_then_decode(rng):
    c = chunks_then_full(rng, 32, 4, B=2, sizes=[4, 1, 1, 1])
    c.sibling = dict(d_model=32, num_heads=2)
    return c


@case(targets="chunked prefill: a multi-token chunk on a non-empty cache needs the mask offset")
def chunked_prefill(rng):
    return chunks_then_full(rng, 32, 4, B=2, sizes=[3, 5, 1])


@case(targets="decoding from the very first token")
def decode_from_scratch(rng):
    return chunks_then_full(rng, 24, 3, B=1, sizes=[1, 1, 1, 1, 1])


@case(targets="one head, batch 3, uneven chunks: a prefill of 65, then 31 and 33 new tokens (65 and 129 keys), then "
              "all 129 at once; the last new token and the last key, alone past 64, count")
def one_head(rng):
    # 65, 33 and 129 new tokens, 65 and 129 keys: one past a whole number of chunks of 2..64 (2..32 for 33), so a
    # chunk count rounded down drops the last new token or key
    return chunks_then_full(rng, 16, 1, B=3, sizes=[65, 31, 33])


@case(targets="a very long cache: a prefill of 3, a chunk of 4094 new tokens, then one decode step (4098 keys, past "
              "the 1024, 2048 or 4096 positions a mask buffer is often built for in __init__): build the mask for the "
              "lengths you are given", dtypes=("float32",))
def very_long_cache(rng):
    x = rng.randn(1, 4098, 4)
    # no full forward after (each call is compared with the reference's): a token-by-token loop stays in its time
    steps = [Call(x[:, :3]), Call(x[:, 3:4097], Prev(0, 1)), Call(x[:, 4097:], Prev(1, 1))]
    return Case(init=dict(d_model=4, num_heads=1), steps=steps, grad=False,  # forward only: the mask (any dtype)
                time_factor=4)  # 4099 tokens: a correct loop over small tiles is many ops, each paying the guards


@case(targets="large activations while decoding: a stable softmax over the cache")
def large_scores_decode(rng):
    x = rng.randn(2, 6, 32, scale=15.0)
    steps = [Call(x[:, :5]), Call(x[:, 5:6], Prev(0, 1))]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, grad=False)  # forward stability only


@case(targets="large activations over a long cache (a prefill of 300, a chunk of 300, a decode step): each row "
              "rescaled when its own running max grows, across tiles of keys", dtypes=("float32",))
def large_scores_long_cache(rng):
    x = rng.randn(1, 601, 16, scale=15.0)
    steps = [Call(x[:, :300]), Call(x[:, 300:600], Prev(0, 1)), Call(x[:, 600:], Prev(1, 1))]
    return Case(init=dict(d_model=16, num_heads=2), steps=steps, grad=False)  # forward stability only


def unit_head_slices(rng, B, S, heads, d_k):
    """x whose every head slice has norm 1: with W_q = a I and W_k = -a I, every score lies in [-a^2, a^2] / sqrt(d_k)
    (within float16) and each token's score on its own key is the lowest, -a^2 / sqrt(d_k)."""
    x = rng.randn(B, S, heads, d_k)
    return (x / x.norm(dim=-1, keepdim=True)).reshape(B, S, heads * d_k)


def _own_score(rng, score):
    """With W_k = -W_q, the first token's one visible score (on key 0) is `score` (negative)."""
    d, a = 8, (-2 * score) ** 0.5  # 2 heads of width 4: the first token's score on key 0 is -a^2 / 2
    eye = torch.eye(d)
    x = unit_head_slices(rng, 2, 6, 2, 4)
    steps = [Call(x[:, :5]), Call(x[:, 5:], Prev(0, 1))]
    return Case(init=dict(d_model=d, num_heads=2), steps=steps, grad=False,  # forward only, as for large scores
                weights={"W_q.weight": a * eye, "W_q.bias": torch.zeros(d), "W_k.weight": -a * eye,
                         "W_k.bias": torch.zeros(d)})


@case(targets="a first token whose only visible score is far below -1e4: mask future keys with -inf, not a large "
              "negative number")
def very_negative_own_score(rng):
    return _own_score(rng, -1.5e4)


@case(targets="a chunk of two tokens on a cache, the first seeing only keys it scores far below -1e4: mask the chunk's "
              "future keys with -inf on the cached path too, not a large negative number")
def very_negative_scores_in_a_cached_chunk(rng):
    d, a = 8, (2 * 1.5e4) ** 0.5  # 2 heads of width 4, W_k = -W_q: a token's score on a copy of itself is -1.5e4
    eye = torch.eye(d)
    x = unit_head_slices(rng, 2, 4, 2, 4)
    # token 1 sees keys 0 and 1 along one direction: -16000 on key 0, -17067 on its own, so key 0 takes the weight (a
    # correct softmax's sum is then exact however it is written: exp(s - logsumexp(s)) lost 1e-3 where two tied).
    # Token 2 is its future
    x[:, 1] = x[:, 0] * (16 / 15)
    steps = [Call(x[:, :1]), Call(x[:, 1:3], Prev(0, 1)), Call(x[:, 3:], Prev(1, 1))]
    return Case(init=dict(d_model=d, num_heads=2), steps=steps, grad=False,  # forward only, as for large scores
                weights={"W_q.weight": a * eye, "W_q.bias": torch.zeros(d), "W_k.weight": -a * eye,
                         "W_k.bias": torch.zeros(d)})


@case(targets="a first token whose only visible score is -100000, below float16's range: mask future keys with -inf "
              "(or the minimum of the scores' own dtype), not float16's minimum -65504 in every dtype",
      dtypes=("float32", "bfloat16"))  # float16 cannot hold such a score
def own_score_below_float16_range(rng):
    return _own_score(rng, -1e5)


@case(targets="zero tokens (with zero query/key biases): a visible score of exactly 0 is a score like any other "
              "(mask by position, never by the score's value), in the cache and in a new chunk")
def zero_query_and_key(rng):
    d = 16
    x = rng.randn(2, 8, d)
    x[:, 1] = 0.0  # token 1's key is 0 (no bias): every later token scores exactly 0 on it, from the cache
    x[:, 5] = 0.0  # token 5 (in the second chunk) scores exactly 0 on every key it sees
    z = torch.zeros(d)
    return chunks_then_full(rng, d, 2, B=2, sizes=[3, 4, 1], x=x,
                            weights={"W_q.bias": z, "W_k.bias": z})  # zero input -> zero query and key


@case(targets="a cache past 256 tokens, then new tokens at positions 250..261, then all 262 in one prefill: positions "
              "must be counted exactly; "
              "bfloat16 holds whole numbers exactly only up to 256 (257 rounds to 256, so a token would see the next "
              "one): build positions with an int64 torch.arange (its default), not in the inputs' dtype nor in a "
              "narrow integer type (int8 wraps past 127)",
      dtypes=("float32", "bfloat16"))  # float16 counts exactly that far; float32 (the CPU default) shows positions kept
      # in a narrow integer type (int8 wraps past 127, uint8 past 255)
def long_cache_positions(rng):
    d, past, S, t = 4, 250, 262, 256
    x = rng.randn(1, S, d)
    u = rng.randn(d)
    u = u / u.norm()
    x[0, t], x[0, t + 1] = 4 * u, 8 * u  # W_q = W_k = I: token 256's score on token 257 is 32 / 2 = 16, if it saw it
    eye, z = torch.eye(d), torch.zeros(d)
    steps = [Call(x[:, :past]), Call(x[:, past:], Prev(0, 1)), Call(x)]  # and all 262 tokens in one prefill
    return Case(init=dict(d_model=d, num_heads=1), steps=steps, grad=False,  # forward only: the mask is what it tests
                weights={"W_q.weight": eye, "W_q.bias": z, "W_k.weight": eye, "W_k.bias": z})


@case(targets="two continuations branched from one prefix cache: each attends over the cache it is handed")
def branch_from_prefix(rng):
    prefix, a, b = rng.randn(2, 4, 32), rng.randn(2, 3, 32), rng.randn(2, 2, 32)
    steps = [Call(prefix), Call(a, Prev(0, 1)), Call(b, Prev(0, 1)),
             Call(torch.cat([prefix, a], dim=1)), Call(torch.cat([prefix, b], dim=1))]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, checks=[
        Same(Cat([Out(0, 0), Out(1, 0)], dim=1), Out(3, 0), OWN_CACHE),
        Same(Cat([Out(0, 0), Out(2, 0)], dim=1), Out(4, 0), OWN_CACHE),
        Same(Out(2, 1, 0), Out(4, 1, 0), CACHE_FULL),
    ])


@case(targets="generation as inference runs it (torch.no_grad()): two continuations branched from one prefix cache, "
              "each over the cache it is handed; a cache buffer written in place only when autograd is off shows here")
def branch_from_prefix_inference(rng):
    prefix, a, b = rng.randn(1, 5, 16), rng.randn(1, 2, 16), rng.randn(1, 3, 16)
    steps = [Call(prefix), Call(a, Prev(0, 1)), Call(b, Prev(0, 1)),
             Call(torch.cat([prefix, a], dim=1)), Call(torch.cat([prefix, b], dim=1))]
    return Case(init=dict(d_model=16, num_heads=2), steps=steps, grad=False, checks=[
        Same(Cat([Out(0, 0), Out(1, 0)], dim=1), Out(3, 0), OWN_CACHE),
        Same(Cat([Out(0, 0), Out(2, 0)], dim=1), Out(4, 0), OWN_CACHE),
    ])


@case(targets="two sequences decoded in turns on one layer: each continues from its own cache")
def interleaved_sequences(rng):
    x, y = rng.randn(2, 6, 24), rng.randn(2, 5, 24)
    steps = [Call(x[:, :4]), Call(y[:, :3]), Call(x[:, 4:5], Prev(0, 1)), Call(y[:, 3:], Prev(1, 1)),
             Call(x[:, 5:], Prev(2, 1)), Call(x), Call(y)]
    return Case(init=dict(d_model=24, num_heads=2), steps=steps, checks=[
        Same(Cat([Out(0, 0), Out(2, 0), Out(4, 0)], dim=1), Out(5, 0), OWN_CACHE),
        Same(Cat([Out(1, 0), Out(3, 0)], dim=1), Out(6, 0), OWN_CACHE),
    ])


@case(targets="the caller cuts rejected draft tokens off the returned cache (speculative decoding: a view of it, the "
              "same storage), then reorders its batch (beam search): attend over exactly the cache you are handed, "
              "never over one kept by its data_ptr()")
def cache_cut_and_reordered(rng):
    x, d = rng.randn(2, 7, 24), rng.randn(2, 2, 24)  # 4 accepted tokens then 3 drafts; then 2 new tokens
    cut = (Prev(0, 1, 0).narrow(2, 0, 4), Prev(0, 1, 1).narrow(2, 0, 4))  # k[:, :, :4], v[:, :, :4]
    swapped = (Prev(1, 1, 0).index_select(0, [1, 0]), Prev(1, 1, 1).index_select(0, [1, 0]))
    return Case(init=dict(d_model=24, num_heads=3), steps=[Call(x), Call(d[:, :1], cut), Call(d[:, 1:], swapped)])


@case(targets="a cache continued on a new layer with the same weights: only the cache carries the history")
def continue_on_new_layer(rng):
    x = rng.randn(2, 8, 32)
    steps = [Call(x[:, :5]), Call(x[:, 5:7], Prev(0, 1)).fresh(), Call(x[:, 7:], Prev(1, 1)).fresh(), Call(x)]
    return Case(init=dict(d_model=32, num_heads=4), steps=steps, checks=[
        Same(Cat([Out(0, 0), Out(1, 0), Out(2, 0)], dim=1), Out(3, 0), OWN_CACHE),
        Same(Out(2, 1, 0), Out(3, 1, 0), CACHE_FULL),
    ])


@case(targets="the caller changes the weights in place between two calls (an optimizer step): the second call uses "
              "the new ones, nothing computed from the old weights may be kept on self")
def weights_updated_between_calls(rng):
    x = rng.randn(2, 4, 16)
    new = {f"{w}.weight": rng.randn(16, 16, scale=0.25) for w in ("W_q", "W_k", "W_v", "W_o")}
    new.update({f"{w}.bias": rng.randn(16, scale=0.1) for w in ("W_q", "W_k", "W_v", "W_o")})  # biases kept are stale too
    return Case(init=dict(d_model=16, num_heads=2), steps=[Call(x), Call(x).updated(new)],
                grad=False)  # a training step runs backward before it changes the weights: a forward property


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(rng.randn(2, 5, 32)).temporary_inputs() for _ in range(4)],
                grad=False)  # inference


@case(targets="one input buffer the caller refills in place between calls (a static decoding buffer): the output comes "
              "from this call's values, never from a result kept by the tensor object (id, weakref, data_ptr)")
def input_buffer_refilled(rng):
    steps = [Call(rng.randn(2, 4, 16))] + [Call(Refill(0, 0, rng.randn(2, 4, 16))) for _ in range(2)]
    return Case(init=dict(d_model=16, num_heads=2), steps=steps, grad=False)  # written in place: a forward property


@case(targets="an input that needs no gradient (the first layer of a model, fed embeddings with "
              "requires_grad=False): the weights' gradients are still graded, so autograd may not be switched off "
              "because the input needs none")
def input_needs_no_grad(rng):
    return Case(init=dict(d_model=16, num_heads=2), steps=[Call(Const(rng.randn(2, 5, 16)))])


@case(targets="a training step (a new nn.Module starts in training mode): a prefill, then a chunk on its cache; the cache "
              "is returned as in eval mode, backward runs, and over 1024 copies the mean output is eval mode's")
def training(rng):
    x = rng.randn(1, 6, 32)
    return training_step(dict(d_model=32, num_heads=4), [(x[:, :4],), (x[:, 4:], Prev(0, 1))], out=(0,))


@case(targets="the same training step on inputs that need no gradient (a layer on frozen embeddings): the weights "
              "still get theirs (torch.utils.checkpoint's use_reentrant=True builds no graph then: use_reentrant=False)")
def training_inputs_need_no_grad(rng):
    x = rng.randn(1, 6, 32)
    return training_step(dict(d_model=32, num_heads=4), [(x[:, :4],), (x[:, 4:], Prev(0, 1))], out=(0,),
                         inputs_need_grad=False)
