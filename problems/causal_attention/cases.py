"""Hidden cases for causal_attention."""

import torch

from torchcode.grader.cases import Call, Case, Out, Same, baseline, benchmark, case

FUTURE = ("changing only tokens after position {t} changed your outputs at positions <= {t}: "
          "your attention reads future tokens (mask scores where j > i, before the softmax)")


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


@case(targets="large-magnitude scores: a stable softmax with -inf masking")
def large_scores(rng):
    return with_future_changed(rng, 2, 8, 16, t=2, scale=25.0, grad=False)  # forward stability only


@benchmark
def bench_inputs(rng, S):
    return Case(steps=[Call(rng.randn(1, S, 64), rng.randn(1, S, 64), rng.randn(1, S, 64))])


@baseline
def fused(Q, K, V):
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
