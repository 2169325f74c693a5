"""Hidden cases for linear_attention. Every case forbids an intermediate of B x S x S elements."""

import torch

from torchcode.grader.cases import Alias, Call, Case, Fn, Out, Refill, Same, baseline, benchmark, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("query position", "feature"), "Q": ("query position", "feature"),
        "K": ("key position", "feature"), "V": ("key position", "feature")}

SxS = "the size of the full score matrix phi(Q) phi(K)^T"


def lin(B, S, *tensors, **kw):
    return Case(steps=[Call(*tensors, **kw)], max_intermediate=B * S * S, intermediate_hint=SxS)


@case(targets="never builds the S x S matrix: summarise keys and values first")
def long_sequence(rng):
    B, S = 2, 201  # a multiple of no chunk size: a chunked sum over keys keeps its last, shorter chunk
    return lin(B, S, rng.randn(B, S, 16), rng.randn(B, S, 16), rng.randn(B, S, 8))


ONE = ("with every value row the same vector v, your output was not v at every query: each query's weights over the "
       "keys must sum to 1. Divide by the normaliser phi(q) . (phi(k) summed over the key positions), plus eps")


@case(targets="every value row the same vector: each query's weights sum to 1, so every output row is that vector")
def weights_sum_to_one(rng):
    B, S = 2, 24
    v = rng.randn(1, 1, 8)
    c = lin(B, S, rng.randn(B, S, 8), rng.randn(B, S, 8), v.expand(B, S, 8).clone())
    c.checks, c.grad = [Same(Out(0), Fn(lambda o: v.to(o.dtype).expand_as(o), Out(0)), ONE)], False  # forward only
    return c


@case(targets="one set of buffers reused by the caller: the same Q, K, V objects, refilled in place with new values, "
              "need the new answer (nothing may be kept by the tensors' id() or data_ptr())")
def buffers_refilled(rng):
    B, S = 2, 20
    c = lin(B, S, rng.randn(B, S, 8), rng.randn(B, S, 8), rng.randn(B, S, 8))
    c.steps.append(Call(*(Refill(0, j, rng.randn(B, S, 8)) for j in range(3))))
    c.grad = False  # Q, K, V are written into between the calls: a forward property
    return c


@case(targets="phi = elu + 1 and the normaliser; 65 positions, the last one alone past 64")
def basic(rng):
    B, S = 3, 65  # one past a whole number of chunks of 2..64: a chunked sum whose chunk count is rounded down drops a key
    return lin(B, S, rng.randn(B, S, 8), rng.randn(B, S, 8), rng.randn(B, S, 8))


@case(targets="eps (5 here) is added to the denominator as given, and only there: not to the features phi(q), phi(k), "
              "nor to the numerator")
def custom_eps(rng):
    B, S = 2, 32
    return lin(B, S, rng.randn(B, S, 4), rng.randn(B, S, 4), rng.randn(B, S, 6), eps=5.0)


@case(targets="eps as the contract's default (1e-6) when the caller leaves it out: features so small that eps "
              "weighs in the denominator")
def default_eps_weighs(rng):
    # phi(x) = elu(x) + 1 ~ 1e-3 for x ~ -6.9 (still exact enough in float32): phi(q) . sum_j phi(k_j) ~ 3e-5, so
    # another default (1e-5 written as a sentinel resolved in the body, or read from **kwargs) moves the output
    # by a fifth of its size. Forward only: the gradient divides by the denominator squared, past float16's range.
    B, S = 1, 8
    # (No bound on intermediates: at S = 8 a block of rows is the whole matrix; the other cases bound them.)
    return Case(steps=[Call(rng.randn(B, S, 4, scale=0.3) - 6.9, rng.randn(B, S, 4, scale=0.3) - 6.9,
                            rng.randn(B, S, 4))], grad=False)


@case(targets="eps = 0 from the caller is used as given (`eps = eps or 1e-6` turns it into 1e-6): features so small "
              "that 1e-6 weighs in the denominator", dtypes=("float32",))  # with nothing added to it, the
def eps_zero_as_given(rng):  # denominator rounds to 0 in half precision: elu(x) + 1 cancels to 0 in bfloat16, phi(q_i)
    # phi(k_j) ~ 1e-6 is subnormal in float16; the semantics is float32's to judge
    B, S = 1, 8  # as default_eps_weighs: phi(q) . sum_j phi(k_j) ~ 3e-5, so 1e-6 moves the output by about 3%
    return Case(steps=[Call(rng.randn(B, S, 4, scale=0.3) - 6.9, rng.randn(B, S, 4, scale=0.3) - 6.9,
                            rng.randn(B, S, 4), eps=0.0)], grad=False)


@case(targets="Dk != Dv, batch 1, odd length")
def rectangular(rng):
    B, S = 1, 37
    return lin(B, S, rng.randn(B, S, 12), rng.randn(B, S, 12), rng.randn(B, S, 5))


@case(targets="a single token")
def single_token(rng):
    # S x S is 1 element here: no memory bound, just the math at its smallest
    return Case(steps=[Call(rng.randn(3, 1, 8), rng.randn(3, 1, 8), rng.randn(3, 1, 4))])


@case(targets="large negative and positive activations (elu saturates)")
def large_inputs(rng):
    B, S = 2, 24
    return lin(B, S, rng.randn(B, S, 8, scale=8.0), rng.randn(B, S, 8, scale=8.0), rng.randn(B, S, 8))


@case(targets="work grows linearly with S: no phi(Q) phi(K)^T, not even a block of rows at a time")
def linear_work(rng):
    sizes = (64, 256, 1024)
    steps = [Call(rng.randn(2, S, 16), rng.randn(2, S, 16), rng.randn(2, S, 16)) for S in sizes]
    # at S=1024 the reference does 1.31M and every right/ variant 1.28M-1.35M; phi(Q) phi(K)^T alone is 33.6M. The
    # bound on the total holds however much cheap work is added to dilute the growth between sizes.
    return Case(steps=steps, grad=False, sizes=sizes, max_work_exponent=1.5, max_work=4 * 1_312_768,
                work_hint="the sums over keys (phi(K)^T V and phi(K) summed) must be computed once and shared by "
                          "every query; any product of queries with all keys is S x S work")


@case(targets="work grows linearly with S in training too (autograd on): no quadratic path taken only when "
              "gradients are needed")
def linear_work_training(rng):
    c = linear_work(rng)
    c.grad = True  # the forward calls are measured as under no_grad; the backward is not
    return c


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    steps = [Call(*(rng.randn(2, 20, 8) for _ in range(3))).temporary_inputs() for _ in range(4)]
    return Case(steps=steps, max_intermediate=2 * 20 * 20, intermediate_hint=SxS, grad=False)  # inference


@case(targets="one tensor object passed as Q and K (then as Q, K and V): a shortcut taken when Q is K may not assume "
              "V is the same object too"
              "; then equal values in distinct tensors: each input needs its own gradient (never reuse one for "
              "another because their values are equal)")
def query_is_key(rng):
    x, y = rng.randn(2, 9, 8), rng.randn(2, 7, 8)
    w = rng.randn(2, 5, 8)  # equal values in three tensors: each needs its own gradient
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 9, 8)), Call(y, Alias(1, 0), Alias(1, 0)),
                       Call(w, w.clone(), w.clone())])


@benchmark
def bench_inputs(rng, S):
    return Case(steps=[Call(rng.randn(1, S, 64), rng.randn(1, S, 64), rng.randn(1, S, 64))])


@baseline
def fused_softmax_attention(Q, K, V, eps=1e-6):
    """Not the same function: the O(S^2) softmax attention that linear attention replaces."""
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V)
