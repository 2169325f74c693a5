"""Hidden cases for sliding_window."""

from torchcode.grader.cases import Alias, Call, Case, Out, Refill, Same, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("position", "feature"), "Q": ("position", "feature"), "K": ("position", "feature"),
        "V": ("position", "feature")}


def qkv(rng, B, S, D, scale=1.0):
    return [rng.randn(B, S, D, scale=scale) for _ in range(3)]


@case(targets="window 2 on both sides: |i - j| <= 2, edges included; 65 positions, the last one alone past 64")
def window_two(rng):
    # 65: one past a whole number of chunks of 2..64 queries or keys, so a chunk count rounded down drops the last one
    return Case(steps=[Call(*qkv(rng, 2, 65, 16), 2)])


@case(targets="outputs do not depend on tokens outside the window (both sides)")
def locality(rng):
    S, w = 14, 2
    Q, K, V = qkv(rng, 2, S, 8)
    K2, V2 = K.clone(), V.clone()
    K2[:, 7:], V2[:, 7:] = rng.randn(2, S - 7, 8), rng.randn(2, S - 7, 8)  # far right of positions 0..4
    K3, V3 = K.clone(), V.clone()
    K3[:, :5], V3[:, :5] = rng.randn(2, 5, 8), rng.randn(2, 5, 8)  # far left of positions 7..13
    return Case(steps=[Call(Q, K, V, w), Call(Q, K2, V2, w), Call(Q, K3, V3, w)], checks=[
        Same(Out(1)[:, :5], Out(0)[:, :5], "changing tokens more than window_size to the right changed your "
             "output: the window must stop at i + window_size"),
        Same(Out(2)[:, 7:], Out(0)[:, 7:], "changing tokens more than window_size to the left changed your "
             "output: the window must stop at i - window_size"),
    ])


@case(targets="window 0: every position attends only to itself")
def window_zero(rng):
    return Case(steps=[Call(*qkv(rng, 2, 6, 8), 0)])


@case(targets="window >= S: full attention, no index errors")
def window_exceeds_length(rng):
    return Case(steps=[Call(*qkv(rng, 1, 7, 16), 50)])


@case(targets="a window of 10**9 ('attend to everything'): the same as full causal attention, and nothing may be "
              "sized by the window itself (pad or allocate by min(window_size, S))")
def huge_window(rng):
    return Case(steps=[Call(*qkv(rng, 2, 6, 8), 10 ** 9)])


@case(targets="window 1 on a short sequence, batch 3")
def window_one(rng):
    return Case(steps=[Call(*qkv(rng, 3, 5, 4), 1)])


@case(targets="a window wider than a tile (40 on each side) on a longer sequence (131 tokens): every key within 40 "
              "positions counts, not only those in the query's own and neighbouring blocks")
def wide_window_long_sequence(rng):
    return Case(steps=[Call(*qkv(rng, 1, 131, 8), 40)])


@case(targets="windows wider than a block of 256 (300 on each side of 700 tokens, then 598 of 600): every key within "
              "the window counts, however many blocks away", dtypes=("float32",))
def window_wider_than_a_block(rng):
    steps = [Call(*qkv(rng, 1, 700, 4), 300), Call(*qkv(rng, 1, 600, 4), 598)]
    # forward only: the band is what it tests. 1300 queries: a correct loop over them (right/per_position_slices.py)
    # took 0.5 s on the CPU and 5-6 s in a CUDA worker (an H100; each small op pays the guards and a launch)
    return Case(steps=steps, grad=False, time_factor=4)


@case(targets="one length, several window sizes in one run: the band depends on window_size, not only on S; windows "
              "of S - 2 and S / 2 are still bands (the first and last tokens do not see each other), not full attention")
def windows_share_length(rng):
    return Case(steps=[Call(*qkv(rng, 2, 8, 8), w) for w in (1, 3, 0, 20, 6, 4, 1)])


@case(targets="a zero query and a zero key: an in-window score of exactly 0 is a score like any other (mask by "
              "distance, never by the score's value)")
def zero_query_and_key(rng):
    Q, K, V = qkv(rng, 2, 9, 8)
    Q[:, 4] = 0.0  # every score of position 4 is exactly 0: uniform weights over its window, positions 2..6
    K[:, 3] = 0.0  # key 3 scores exactly 0 for every query, and positions 1..5 may see it
    return Case(steps=[Call(Q, K, V, 2)])


@case(targets="large-magnitude scores: a stable softmax")
def large_scores(rng):
    return Case(steps=[Call(*qkv(rng, 2, 9, 16, scale=25.0), 3)], grad=False)  # forward stability only


@case(targets="large-magnitude scores with a window that covers the whole sequence: the same stable softmax when "
              "nothing is masked")
def full_window_large_scores(rng):
    return Case(steps=[Call(*qkv(rng, 2, 8, 16, scale=25.0), 7), Call(*qkv(rng, 1, 6, 16, scale=25.0), 40)],
                grad=False)  # forward stability only


@case(targets="a single token")
def single_token(rng):
    return Case(steps=[Call(*qkv(rng, 2, 1, 8), 2)])


@case(targets="a query whose in-window scores are all far below -1e4: out-of-window scores must be -inf, not a "
              "large negative number")
def very_negative_window_scores(rng):
    B, S, D = 2, 6, 4
    Q, K, V = rng.randn(B, S, D, scale=0.1), rng.randn(B, S, D), rng.randn(B, S, D)
    u = rng.randn(B, D)
    u = u / u.norm(dim=-1, keepdim=True)  # a unit direction per batch element
    Q[:, 0] = 2 * u
    K[:, 0], K[:, 1] = -1.5e4 * u, -1.6e4 * u  # query 0's window (keys 0, 1): scores -15000 and -16000
    return Case(steps=[Call(Q, K, V, 1)], grad=False)  # forward only: such scores' gradients are ill-conditioned


@case(targets="a long sequence (300 tokens): positions must be counted exactly; bfloat16 holds whole numbers "
              "exactly only up to 256, so build positions with an int64 torch.arange (its default), not in the "
              "inputs' dtype nor in a narrow integer type (int8 wraps past 127)",
      dtypes=("float32", "bfloat16"))  # float16 counts exactly that far; float32 (the CPU default) shows positions kept
      # in a narrow integer type (int8 wraps past 127, uint8 past 255)
def long_sequence_positions(rng):
    return Case(steps=[Call(*qkv(rng, 1, 300, 4), 2)], grad=False)  # forward only: the band is what it tests


@case(targets="a very long sequence (4099 tokens, past the 1024, 2048 or 4096 positions a mask or distance table is "
              "often built for once): build the band for the length you are given", dtypes=("float32",))
def very_long_sequence(rng):
    # a short call first: a table sized by the first call ever made is too small here, whichever case ran before
    steps = [Call(*qkv(rng, 1, 5, 4), 2), Call(*qkv(rng, 1, 4099, 4), 16)]
    return Case(steps=steps, grad=False,  # forward only: the band is what it tests (any dtype shows it)
                time_factor=4)  # 4099 tokens: a correct loop over small tiles is many ops, each paying the guards


@case(targets="gradients on a long sequence (2100 tokens, past 2048; window 40): a path taken only for long inputs "
              "(chunks, buffers, `out=` products, an in-place softmax) must support backward too", dtypes=("float32",))
def long_sequence_gradients(rng):
    return Case(steps=[Call(*qkv(rng, 1, 2100, 8), 40)], time_factor=2)


@case(targets="a query whose in-window scores are all near -100000, below float16's range: out-of-window scores "
              "must be -inf (or the minimum of the scores' own dtype), not float16's minimum -65504 in every dtype",
      dtypes=("float32", "bfloat16"))  # float16 cannot hold such scores
def window_scores_below_float16_range(rng):
    B, S, D = 2, 6, 4
    Q, K, V = rng.randn(B, S, D, scale=0.1), rng.randn(B, S, D), rng.randn(B, S, D)
    u = rng.randn(B, D)
    u = u / u.norm(dim=-1, keepdim=True)
    Q[:, 0] = 2 * u
    K[:, 0], K[:, 1] = -1e5 * u, -1.1e5 * u  # query 0's window (keys 0, 1): scores -100000 and -110000
    return Case(steps=[Call(Q, K, V, 1)], grad=False)


@case(targets="one set of buffers reused by the caller: the same Q, K, V objects, refilled in place with new values, "
              "need the new answer (nothing may be kept by the tensors' id() or data_ptr())")
def buffers_refilled(rng):
    shape = (2, 7, 8)
    return Case(steps=[Call(*(rng.randn(*shape) for _ in range(3)), 2),
                       Call(*(Refill(0, j, rng.randn(*shape)) for j in range(3)), 2)],
                grad=False)  # Q, K, V are written into between the calls: a forward property


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    steps = [Call(*(rng.randn(2, 7, 8) for _ in range(3)), 2).temporary_inputs() for _ in range(4)]
    return Case(steps=steps, grad=False)  # inference


@case(targets="one tensor object passed as Q and K (attention(x, x, v), self-attention without projections), then as Q, K "
              "and V: a shortcut taken when Q is K (the scores are then symmetric) is graded here"
              "; then equal values in distinct tensors: each input needs its own gradient (never reuse one for "
              "another because their values are equal)")
def query_is_key(rng):
    x, y = rng.randn(2, 9, 8), rng.randn(2, 7, 8)
    w = rng.randn(2, 5, 8)  # equal values in three tensors: each needs its own gradient
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 9, 8), 3), Call(y, Alias(1, 0), Alias(1, 0), 3),
                       Call(w, w.clone(), w.clone(), 3)])


@case(targets="Q is K (then Q, K and V one object) in an inference loop under torch.no_grad(): a shortcut taken only "
              "when autograd is off is graded here too")
def query_is_key_inference(rng):
    x, y = rng.randn(2, 9, 8), rng.randn(2, 7, 8)
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 9, 8), 3), Call(y, Alias(1, 0), Alias(1, 0), 3)],
                grad=False)
