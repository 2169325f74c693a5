"""Hidden cases for sdpa."""

import torch

from torchcode.grader.cases import Call, Case, baseline, benchmark, case


def _mask(rng, *shape):
    """A random boolean mask in which every query row can see at least one key."""
    m = rng.bernoulli(*shape, p=0.6)
    first = rng.randint(0, shape[-1], shape[:-1])
    return m | torch.nn.functional.one_hot(first, shape[-1]).bool()


@case(targets="3-D inputs with Lq != Lk and Dv != Dk: softmax over keys, scale by sqrt(Dk)")
def batched_3d(rng):
    return Case(steps=[Call(rng.randn(2, 5, 16), rng.randn(2, 7, 16), rng.randn(2, 7, 24))])


@case(targets="4-D inputs (batch, heads, seq, dim): transpose the last two dims only")
def heads_4d(rng):
    return Case(steps=[Call(rng.randn(2, 3, 6, 8), rng.randn(2, 3, 9, 8), rng.randn(2, 3, 9, 8))])


@case(targets="no batch dims at all, and a single query")
def unbatched_single_query(rng):
    return Case(steps=[Call(rng.randn(1, 32), rng.randn(11, 32), rng.randn(11, 4))])


@case(targets="a key-padding mask broadcast over queries: False keys get weight 0")
def padding_mask(rng):
    mask = _mask(rng, 3, 1, 10)
    return Case(steps=[Call(rng.randn(3, 4, 16), rng.randn(3, 10, 16), rng.randn(3, 10, 16), mask)])


@case(targets="a full (Lq, Lk) mask on 4-D inputs: mask before the softmax, with -inf")
def full_mask(rng):
    mask = _mask(rng, 2, 2, 7, 7)
    return Case(steps=[Call(rng.randn(2, 2, 7, 8), rng.randn(2, 2, 7, 8), rng.randn(2, 2, 7, 8), mask=mask)])


@case(targets="large-magnitude scores: the softmax must be numerically stable")
def large_scores(rng):
    return Case(steps=[Call(rng.randn(2, 6, 16, scale=30.0), rng.randn(2, 6, 16, scale=30.0), rng.randn(2, 6, 16))],
                grad=False)  # logits ~1e3: test the forward's stability; gradients there are ill-conditioned


@case(targets="5-D inputs and odd sizes")
def five_d(rng):
    return Case(steps=[Call(rng.randn(1, 2, 2, 3, 5), rng.randn(1, 2, 2, 13, 5), rng.randn(1, 2, 2, 13, 3))])


@benchmark
def bench_inputs(rng, S):
    return Case(steps=[Call(rng.randn(1, 8, S, 64), rng.randn(1, 8, S, 64), rng.randn(1, 8, S, 64))])


@baseline
def fused(Q, K, V, mask=None):
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
