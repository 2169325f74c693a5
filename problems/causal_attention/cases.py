"""Hidden cases for causal_attention."""

import torch

from torchcode.grader.cases import Alias, Call, Case, Out, Refill, Same, baseline, benchmark, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("position", "feature"), "Q": ("position", "feature"), "K": ("position", "feature"),
        "V": ("position", "feature")}

FUTURE = ("changing only tokens after position {t} changed your outputs at positions <= {t}: "
          "your attention reads future tokens (mask scores where j > i, before the softmax), or normalises over "
          "the queries (the softmax runs over the keys, the last dim)")


def with_future_changed(rng, B, S, D, t, scale=1.0, grad=True):
    """A call, and the same call with every token after position t replaced."""
    Q, K, V = (rng.randn(B, S, D, scale=scale) for _ in range(3))
    Q2, K2, V2 = Q.clone(), K.clone(), V.clone()
    for x in (Q2, K2, V2):
        x[:, t + 1:] = rng.randn(B, S - t - 1, D, scale=scale)
    return Case(steps=[Call(Q, K, V), Call(Q2, K2, V2)], grad=grad,
                checks=[Same(Out(1)[:, : t + 1], Out(0)[:, : t + 1], FUTURE.format(t=t))])


@case(targets="no output depends on a future token")
def no_peeking(rng):
    return with_future_changed(rng, 2, 9, 16, t=4)


@case(targets="the diagonal is included: position 0 returns V[0]")
def includes_self(rng):
    return Case(steps=[Call(rng.randn(2, 6, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8))])


@case(targets="odd length, batch 1")
def odd_length(rng):
    return Case(steps=[Call(rng.randn(1, 13, 32), rng.randn(1, 13, 32), rng.randn(1, 13, 32))])


@case(targets="a single token")
def single_token(rng):
    return Case(steps=[Call(rng.randn(3, 1, 8), rng.randn(3, 1, 8), rng.randn(3, 1, 8))])


@case(targets="a zero query and a zero key: an allowed score of exactly 0 is a score like any other (mask by "
              "position, never by the score's value)")
def zero_query_and_key(rng):
    Q, K, V = (rng.randn(2, 7, 8) for _ in range(3))
    Q[:, 3] = 0.0  # every score of position 3 is exactly 0: uniform weights over positions 0..3
    K[:, 1] = 0.0  # key 1 scores exactly 0 for every query, and every query from position 1 on may see it
    return Case(steps=[Call(Q, K, V)])


@case(targets="large-magnitude scores: a stable softmax with -inf masking")
def large_scores(rng):
    return with_future_changed(rng, 2, 8, 16, t=2, scale=25.0, grad=False)  # forward stability only


@case(targets="large activations over 600 tokens (more than four tiles of 128, two of 256): each row rescaled when "
              "its own running max grows", dtypes=("float32",))
def large_scores_many_tiles(rng):
    return Case(steps=[Call(*(rng.randn(1, 600, 16, scale=25.0) for _ in range(3)))], grad=False)  # forward only


@case(targets="a query whose only allowed score is far below -1e4: masked scores must be -inf, not a large negative number")
def very_negative_own_score(rng):
    B, S, D = 2, 6, 4
    Q, K, V = rng.randn(B, S, D, scale=0.1), rng.randn(B, S, D), rng.randn(B, S, D)
    u = rng.randn(B, D)
    u = u / u.norm(dim=-1, keepdim=True)  # a unit direction per batch element
    Q[:, 0] = 2 * u
    K[:, 0] = -1.5e4 * u  # position 0's one allowed score: q0 . k0 / sqrt(D) = -15000
    return Case(steps=[Call(Q, K, V)], grad=False)  # forward only: the gradients of such scores are ill-conditioned


@case(targets="a query whose only allowed score is -100000, below float16's range: masked scores must be -inf "
              "(or the minimum of the scores' own dtype), not float16's minimum -65504 in every dtype",
      dtypes=("float32", "bfloat16"))  # float16 cannot hold such a score
def own_score_below_float16_range(rng):
    B, S, D = 2, 5, 4
    Q, K, V = rng.randn(B, S, D, scale=0.1), rng.randn(B, S, D), rng.randn(B, S, D)
    u = rng.randn(B, D)
    u = u / u.norm(dim=-1, keepdim=True)
    Q[:, 0] = 2 * u
    K[:, 0] = -1e5 * u  # position 0's one allowed score: q0 . k0 / sqrt(D) = -100000
    return Case(steps=[Call(Q, K, V)], grad=False)


@case(targets="a long sequence (300 tokens): positions must be counted exactly; bfloat16 holds whole numbers exactly "
              "only up to 256 (257 rounds to 256, so a token would see the next one): build positions with an "
              "int64 torch.arange (its default), not in the inputs' dtype nor in a narrow integer "
              "type (int8 wraps past 127)",
      dtypes=("float32", "bfloat16"))  # float16 counts exactly that far; float32 (the CPU default) shows positions kept
      # in a narrow integer type (int8 wraps past 127, uint8 past 255)
def long_sequence_positions(rng):
    B, S, D, t = 1, 300, 4, 256
    Q, K, V = (rng.randn(B, S, D) for _ in range(3))
    u = rng.randn(B, D)
    u = u / u.norm(dim=-1, keepdim=True)
    Q[:, t], K[:, t + 1] = 4 * u, 8 * u  # token 256's score on token 257 is 16: it would dominate if it were seen
    V2 = V.clone()
    V2[:, t + 1:] = rng.randn(B, S - t - 1, D)
    return Case(steps=[Call(Q, K, V), Call(Q, K, V2)], grad=False,  # forward only: the mask is what it tests
                checks=[Same(Out(1)[:, : t + 1], Out(0)[:, : t + 1], FUTURE.format(t=t))])


@case(targets="a short sequence, then a longer one (65 tokens): nothing sized by the first call may be reused, and "
              "the last position, alone past 64, is computed too")
def growing_length(rng):
    # 65: longer than every other case that runs in every dtype, so a table sized by any earlier call is too small;
    # and one past a whole number of chunks of 2..64, so a chunk count rounded down drops the last position
    return Case(steps=[Call(*(rng.randn(2, 4, 8) for _ in range(3))), Call(*(rng.randn(2, 65, 8) for _ in range(3)))])


@case(targets="a very long sequence (4099 tokens, past the 1024, 2048 or 4096 positions a mask is often built for "
              "once, as a buffer): build the mask for the length you are given", dtypes=("float32",))
def very_long_sequence(rng):
    # a short call first: a mask sized by the first call ever made is too small here, whichever case ran before
    steps = [Call(*(rng.randn(1, 5, 4) for _ in range(3))), Call(*(rng.randn(1, 4099, 4) for _ in range(3)))]
    return Case(steps=steps, grad=False,  # forward only: the mask is what it tests (any dtype shows it)
                time_factor=4)  # 4099 tokens: a correct loop over small tiles is many ops, each paying the guards


@case(targets="gradients on a long sequence (2100 tokens, past 2048): a path taken only for long inputs (chunks, "
              "buffers, an in-place softmax) must support backward too", dtypes=("float32",))
def long_sequence_gradients(rng):
    return Case(steps=[Call(*(rng.randn(1, 2100, 8) for _ in range(3)))], time_factor=2)


@case(targets="one set of buffers reused by the caller: the same Q, K, V objects, refilled in place with new values, "
              "need the new answer (nothing may be kept by the tensors' id() or data_ptr())")
def buffers_refilled(rng):
    shape = (2, 6, 8)
    return Case(steps=[Call(*(rng.randn(*shape) for _ in range(3))),
                       Call(*(Refill(0, j, rng.randn(*shape)) for j in range(3)))],
                grad=False)  # Q, K, V are written into between the calls: a forward property


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    steps = [Call(*(rng.randn(2, 6, 8) for _ in range(3))).temporary_inputs() for _ in range(4)]
    return Case(steps=steps, grad=False)  # inference


@case(targets="one tensor object passed as Q and K (attention(x, x, v), self-attention without projections), then as Q, K "
              "and V: a shortcut taken when Q is K (the scores are then symmetric) is graded here"
              "; then equal values in distinct tensors: each input needs its own gradient (never reuse one for "
              "another because their values are equal)")
def query_is_key(rng):
    x, y = rng.randn(3, 7, 12), rng.randn(1, 9, 12)  # shapes no other case uses
    w = rng.randn(2, 5, 12)  # equal values in three tensors: each needs its own gradient
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(3, 7, 12)), Call(y, Alias(1, 0), Alias(1, 0)),
                       Call(w, w.clone(), w.clone())])


@case(targets="Q is K (then Q, K and V one object) in an inference loop under torch.no_grad(): a shortcut taken only "
              "when autograd is off is graded here too")
def query_is_key_inference(rng):
    x, y = rng.randn(3, 6, 12), rng.randn(1, 8, 12)
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(3, 6, 12)), Call(y, Alias(1, 0), Alias(1, 0))],
                grad=False)


@benchmark
def bench_inputs(rng, S):
    return Case(steps=[Call(rng.randn(1, S, 64), rng.randn(1, S, 64), rng.randn(1, S, 64))])


@baseline
def fused(Q, K, V):
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
