"""Hidden cases for rope."""

import torch

from torchcode.grader.cases import Call, Case, Fn, Out, Refill, Same, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("position", "feature"), "q": ("position", "feature"), "k": ("position", "feature")}


@case(targets="interleaved pairs (2i, 2i+1), positions from 0; a pair that is exactly (0, 0) (zero-padded features) "
              "rotates to (0, 0) with a finite gradient")
def basic(rng):
    q, k = rng.randn(2, 8, 16), rng.randn(2, 8, 16)
    q[:, 3, 4:6] = 0.0  # an exact (0, 0) pair: a rotation in polar form (hypot, atan2) has a NaN gradient there
    k[1, 5, 0:2] = 0.0
    return Case(steps=[Call(q, k)])


@case(targets="the base argument is honoured, a fractional one too")
def custom_base(rng):
    # 500, MiniMind's 1e6 (a large whole-number base is still not the default 10000), and a fractional 2.5 (a base
    # is a float: int(2.5) = 2 turns pair 1's 0.795 rad per position into 0.841, 0.23 rad apart at position 5)
    return Case(steps=[Call(rng.randn(2, 6, 8), rng.randn(2, 6, 8), base=500.0),
                       Call(rng.randn(2, 6, 8), rng.randn(2, 6, 8), base=1e6),
                       Call(rng.randn(2, 6, 8), rng.randn(2, 6, 8), base=2.5)])


@case(targets="the same shapes with other bases in one run: nothing computed for one base may serve another")
def bases_share_shapes(rng):
    def qk():
        return rng.randn(2, 10, 16), rng.randn(2, 10, 16)

    # default, then 500, then 10000 again, then 500 again: a table kept for (S, D) or D is stale in some call
    return Case(steps=[Call(*qk()), Call(*qk(), 500.0), Call(*qk(), base=10000.0), Call(*qk(), base=500.0)])


@case(targets="relative position: q_m . k_n depends only on m - n")
def relative_position(rng):
    S, D = 12, 16
    q = rng.randn(1, 1, D).expand(2, S, D).contiguous()  # the same vector at every position
    k = rng.randn(1, 1, D).expand(2, S, D).contiguous()
    scores = Fn(lambda a, b: a @ b.transpose(-2, -1), Out(0, 0), Out(0, 1))  # (2, S, S)
    return Case(steps=[Call(q, k)], checks=[Same(
        scores[:, 1:, 1:], scores[:, :-1, :-1],
        "q_m . k_n changed when m and n moved together: the rotation angle must be position * frequency, "
        "the same function for q and k")])


@case(targets="long sequence (65 positions), wide head: small and large angles; the last position, alone past 64, "
              "is rotated too")
def long_sequence(rng):
    # 65: one past a whole number of chunks of 2..64 positions, so a chunk count rounded down drops the last one
    return Case(steps=[Call(rng.randn(1, 65, 32), rng.randn(1, 65, 32))])


@case(targets="a short call, then a long one (600 tokens) with the same width and base: every position gets its own "
              "angle (a table built for the first call, or capped at some length and wrapped, is wrong past its end)")
def longer_after_short(rng):
    return Case(steps=[Call(rng.randn(1, 10, 8), rng.randn(1, 10, 8)), Call(rng.randn(1, 600, 8), rng.randn(1, 600, 8))])


@case(targets="a very long sequence (16385 tokens, past the 2048, 4096, 8192 or 16384 positions a cached table is often "
              "built for): every position has its own angles")
def very_long_sequence(rng):
    return Case(steps=[Call(rng.randn(1, 16385, 4), rng.randn(1, 16385, 4))])


@case(targets="a single token is at position 0: unchanged")
def single_token(rng):
    return Case(steps=[Call(rng.randn(3, 1, 8), rng.randn(3, 1, 8))])


@case(targets="D = 2, one pair")
def one_pair(rng):
    return Case(steps=[Call(rng.randn(2, 5, 2), rng.randn(2, 5, 2), 100.0)])


@case(targets="one set of buffers reused by the caller: the same q and k objects, refilled in place with new values, "
              "need the new answer (nothing may be kept by the tensors' id() or data_ptr())")
def buffers_refilled(rng):
    shape = (2, 5, 8)
    return Case(steps=[Call(rng.randn(*shape), rng.randn(*shape)),
                       Call(Refill(0, 0, rng.randn(*shape)), Refill(0, 1, rng.randn(*shape)))],
                grad=False)  # q and k are written into between the calls: a forward property


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    return Case(steps=[Call(rng.randn(2, 5, 8), rng.randn(2, 5, 8)).temporary_inputs() for _ in range(4)],
                grad=False)  # inference
