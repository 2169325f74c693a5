"""Hidden cases for sdpa."""

import torch

from torchcode.grader.cases import Alias, Call, Case, Out, Refill, Same, baseline, benchmark, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("query position", "feature"), "Q": ("query position", "feature"),
        "K": ("key position", "feature"), "V": ("key position", "feature")}

MASKED_KEYS = ("changing only the keys and values where mask is False changed your output: masked keys still count. "
               "True means 'may attend': give the other keys' scores -inf before the softmax (a score of 0 still "
               "gives them weight)")


SCALE = ("padding Q and K with zero features (their width Dk -> 4 Dk, every dot product unchanged) should act exactly "
         "as halving the queries, since 1 / sqrt(4 Dk) = 1 / (2 sqrt(Dk)); yours did not. Scale the scores by "
         "1 / sqrt(Dk), Dk the last dim of Q and K (not of V, not Dk unrooted, not a sequence length)")


def _padded(x, width):
    """``x`` with zero features appended up to ``width``: no dot product changes."""
    return torch.cat([x, torch.zeros(*x.shape[:-1], width - x.shape[-1])], dim=-1)


def _mask(rng, *shape):
    """A random boolean mask in which every query row can see at least one key."""
    m = rng.bernoulli(*shape, p=0.6)
    first = rng.randint(0, shape[-1], shape[:-1])
    return m | torch.nn.functional.one_hot(first, shape[-1]).bool()


@case(targets="a long padding mask (65 keys) that is almost all True, its first and last keys allowed, one or two keys "
              "hidden inside: every False counts (a mask may be skipped only when all of it is True), and so does the "
              "last key, alone past 64")
def mask_almost_all_true(rng):
    # 65 keys: 1 past every tile of 2..64 keys, so keys visited in tiles whose count is rounded down drop the last one
    mask = torch.ones(2, 3, 65, dtype=torch.bool)
    mask[0, :, 37] = False  # one hidden key in 65 (98% True), not at an edge
    mask[1, :, 20:22] = False
    K = rng.randn(2, 65, 8)
    K[0, 37], K[1, 20] = 3 * K[0, 37].sign(), 3 * K[1, 20].sign()  # the hidden keys would weigh a lot if seen
    Q = K[:, [37, 20, 5]].clone() + 0.1 * rng.randn(2, 3, 8)
    return Case(steps=[Call(Q, K, rng.randn(2, 65, 8), mask)])


@case(targets="a mask that allows everything for batch element 0 only: every element's mask counts (a mask may be "
              "skipped only when all of it is True)")
def mask_all_true_for_first_element(rng):
    mask = _mask(rng, 3, 5, 7)
    mask[0] = True
    mask[1:, :, 0] = False  # key 0 is hidden from every query of elements 1 and 2 (each row still sees a key)
    mask[1:, :, 1] = True
    return Case(steps=[Call(rng.randn(3, 5, 8), rng.randn(3, 7, 8), rng.randn(3, 7, 8), mask)])


@case(targets="3-D inputs with Lq != Lk (65 queries, 33 keys) and Dv != Dk: softmax over keys, scale by sqrt(Dk); "
              "every query row computed, the last one too (alone past 64)")
def batched_3d(rng):
    # Lq = 65 and Lk = 33: one past a whole number of chunks for every chunk size of 2..64 queries (2..32 keys), so
    # a chunk count rounded down drops the last query (or key)
    return Case(steps=[Call(rng.randn(2, 65, 16), rng.randn(2, 33, 16), rng.randn(2, 33, 24))])


@case(targets="the scale follows the keys' width Dk: Q and K padded with zero features act as halved queries")
def scale_follows_key_width(rng):
    Q, K, V = rng.randn(2, 3, 5, 8), rng.randn(2, 3, 7, 8), rng.randn(2, 3, 7, 24)
    return Case(steps=[Call(Q / 2, K, V), Call(_padded(Q, 32), _padded(K, 32), V)], grad=False,  # a forward property
                checks=[Same(Out(1), Out(0), SCALE)])


@case(targets="4-D inputs (batch, heads, seq, dim): transpose the last two dims only")
def heads_4d(rng):
    return Case(steps=[Call(rng.randn(2, 3, 6, 8), rng.randn(2, 3, 9, 8), rng.randn(2, 3, 9, 8))])


@case(targets="no batch dims at all, and a single query")
def unbatched_single_query(rng):
    return Case(steps=[Call(rng.randn(1, 32), rng.randn(11, 32), rng.randn(11, 4))])


@case(targets="a batch of single queries (one decoding step per sequence), a single key, one head: no size-1 dim "
              "squeezed away")
def batched_single_query(rng):
    return Case(steps=[Call(rng.randn(3, 1, 16), rng.randn(3, 5, 16), rng.randn(3, 5, 8)),
                       Call(rng.randn(2, 2, 1, 8), rng.randn(2, 2, 7, 8), rng.randn(2, 2, 7, 8)),
                       Call(rng.randn(3, 4, 16), rng.randn(3, 1, 16), rng.randn(3, 1, 8)),
                       Call(rng.randn(2, 1, 5, 8), rng.randn(2, 1, 6, 8), rng.randn(2, 1, 6, 4))])  # one head


@case(targets="a key-padding mask broadcast over queries: False keys get weight 0")
def padding_mask(rng):
    mask = _mask(rng, 3, 1, 10)
    Q, K, V = rng.randn(3, 4, 16), rng.randn(3, 10, 16), rng.randn(3, 10, 16)
    hidden = ~mask.transpose(-2, -1)  # (3, 10, 1): the keys no query may see
    K2, V2 = torch.where(hidden, rng.randn(3, 10, 16), K), torch.where(hidden, rng.randn(3, 10, 16), V)
    return Case(steps=[Call(Q, K, V, mask), Call(Q, K2, V2, mask)], checks=[Same(Out(1), Out(0), MASKED_KEYS)])


@case(targets="a full (Lq, Lk) mask on 4-D inputs: mask before the softmax, with -inf")
def full_mask(rng):
    mask = _mask(rng, 2, 2, 7, 7)
    return Case(steps=[Call(rng.randn(2, 2, 7, 8), rng.randn(2, 2, 7, 8), rng.randn(2, 2, 7, 8), mask=mask)])


@case(targets="a 2-D (Lq, Lk) mask on 3-D inputs, Lq != Lk: it is per query, not a (batch, Lk) padding mask")
def mask_2d(rng):
    return Case(steps=[Call(rng.randn(2, 5, 16), rng.randn(2, 7, 16), rng.randn(2, 7, 8), _mask(rng, 5, 7))])


@case(targets="a 2-D (L, L) mask where batch = Lq = Lk: row i is query i's mask, for every batch element")
def mask_2d_square(rng):
    return Case(steps=[Call(rng.randn(6, 6, 8), rng.randn(6, 6, 8), rng.randn(6, 6, 8), mask=_mask(rng, 6, 6))])


@case(targets="masks with fewer dims than the scores broadcast from the right: (H, Lq, Lk), (1, Lk) and (Lq, Lk) on "
              "(B, H, Lq, Lk) (a 2-D mask is never a (B, Lk) padding mask)")
def mask_fewer_dims(rng):
    Q, K, V = rng.randn(3, 3, 5, 8), rng.randn(3, 3, 6, 8), rng.randn(3, 3, 6, 8)
    Q2, K2, V2 = rng.randn(5, 2, 5, 8), rng.randn(5, 2, 6, 8), rng.randn(5, 2, 6, 8)  # batch = Lq: read as (B, Lk),
    # a (Lq, Lk) mask runs, and masks the wrong keys
    return Case(steps=[Call(Q, K, V, _mask(rng, 3, 5, 6)), Call(Q, K, V, _mask(rng, 1, 6)),
                       Call(Q2, K2, V2, _mask(rng, 5, 6))])


@case(targets="a 1-D (Lk,) mask on 4-D inputs, then a (B, Lq, 1) mask (one entry per query) with 100 keys: a mask "
              "broadcasts along every dim it lacks or has of size 1, the keys' included (slice a mask along a dim only "
              "where it has that dim)")
def masks_of_one_dim(rng):
    Q, K, V = rng.randn(2, 2, 20, 8), rng.randn(2, 2, 70, 8), rng.randn(2, 2, 70, 8)
    Q2, K2, V2 = rng.randn(2, 20, 8), rng.randn(2, 100, 8), rng.randn(2, 100, 8)
    return Case(steps=[Call(Q, K, V, _mask(rng, 70)), Call(Q2, K2, V2, torch.ones(2, 20, 1, dtype=torch.bool))])


@case(targets="masks with several leading dims, some of size 1: (B, 1, Lq, Lk) and (1, H, 1, Lk) on 5-D inputs")
def mask_leading_dims(rng):
    Q, K, V = rng.randn(2, 3, 2, 4, 8), rng.randn(2, 3, 2, 5, 8), rng.randn(2, 3, 2, 5, 6)
    return Case(steps=[Call(Q, K, V, _mask(rng, 2, 1, 1, 4, 5)), Call(Q, K, V, _mask(rng, 3, 1, 1, 5))])


@case(targets="the same shapes with other masks in one run: nothing derived from one mask may serve another")
def masks_share_shapes(rng):
    Q, K, V = rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8)
    return Case(steps=[Call(Q, K, V, _mask(rng, 2, 4, 6)) for _ in range(3)])


@case(targets="one set of buffers reused by the caller: the same Q, K, V and mask objects, refilled in place with new "
              "values, need the new answer (nothing may be kept by the tensors' id() or data_ptr())")
def buffers_refilled(rng):
    Q, K, V, mask = rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8), _mask(rng, 2, 4, 6)
    new = (rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8), _mask(rng, 2, 4, 6))
    return Case(steps=[Call(Q, K, V, mask), Call(*(Refill(0, j, t) for j, t in enumerate(new)))],
                grad=False)  # Q, K, V are written into between the calls: a forward property


@case(targets="a query of zeros and a key of zeros (padding embeddings): a score of exactly 0 is an ordinary score, "
              "not a masked one")
def zero_query_and_key(rng):
    Q, K, V = rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8)
    Q[:, 1] = 0.0  # every score of query 1 is exactly 0: uniform weights over the keys it may see
    K[:, 2] = 0.0  # key 2 scores exactly 0 for every query, and every query may see it
    mask = _mask(rng, 2, 4, 6)
    mask[:, :, 2] = True
    return Case(steps=[Call(Q, K, V, mask)])


@case(targets="large-magnitude scores: the softmax must be numerically stable")
def large_scores(rng):
    return Case(steps=[Call(rng.randn(2, 6, 16, scale=30.0), rng.randn(2, 6, 16, scale=30.0), rng.randn(2, 6, 16))],
                grad=False)  # logits ~1e3: test the forward's stability; gradients there are ill-conditioned


@case(targets="600 keys (more than four tiles of 128, two of 256): per-sequence padding, the shortest sequence first "
              "and another in the middle, then a causal (300, 300) mask, then large scores over every key: a running "
              "max and sum carried across tiles, each row rescaled when its own max grows, a tile skipped only when "
              "every row and every batch element has it masked", dtypes=("float32",))
def many_key_tiles(rng):
    Lk, lengths = 600, [100, 600, 350]
    pad = torch.zeros(3, 1, Lk, dtype=torch.bool)
    for b, n in enumerate(lengths):
        pad[b, :, :n] = True
    causal = torch.ones(300, 300, dtype=torch.bool).tril()
    steps = [Call(rng.randn(3, 4, 16), rng.randn(3, Lk, 16), rng.randn(3, Lk, 8), pad),
             Call(rng.randn(1, 300, 8), rng.randn(1, 300, 8), rng.randn(1, 300, 8), causal),
             Call(rng.randn(2, 3, 16, scale=30.0), rng.randn(2, Lk, 16, scale=30.0), rng.randn(2, Lk, 8))]
    return Case(steps=steps, grad=False)  # forward only: the online softmax's bookkeeping is what it tests


@case(targets="large-magnitude scores with a mask: mask the scores before the softmax (a masked key may hold a row's "
              "largest score)")
def large_scores_masked(rng):
    Q, K, V = rng.randn(2, 2, 6, 16, scale=30.0), rng.randn(2, 2, 9, 16, scale=30.0), rng.randn(2, 2, 9, 8)
    return Case(steps=[Call(Q, K, V, mask=_mask(rng, 2, 2, 6, 9))], grad=False)  # forward stability only


def _allowed_scores_near(rng, score, form="full"):
    """Query 0 may attend to keys 0 and 1 only, and its scores there are about `score` (negative). The mask is
    ``form``: "full" (B, Lq, Lk); "padding" (B, 1, Lk), keys 0 and 1 the only real ones; "2d" (Lq, Lk), shared by
    the batch; "single": one query (a decoding step) with a (B, 1, Lk) padding mask."""
    B, Lq, Lk, D = 2, 1 if form == "single" else 3, 5, 4
    Q, K, V = rng.randn(B, Lq, D, scale=0.1), rng.randn(B, Lk, D), rng.randn(B, Lk, 3)
    u = rng.randn(B, D)
    u = u / u.norm(dim=-1, keepdim=True)  # a unit direction per batch element
    Q[:, 0] = 2 * u
    K[:, 0], K[:, 1] = score * u, score * 16 / 15 * u  # query 0's scores on keys 0 and 1: score, 16/15 score
    K[:, 2:] *= 0.01  # a hidden key scores about 0: far above `score`, unless masked with -inf
    first = torch.tensor([True, True, False, False, False])  # query 0 may attend to keys 0 and 1 only
    if form == "full":
        mask = _mask(rng, B, Lq, Lk)
        mask[:, 0] = first
    elif form == "2d":
        mask = _mask(rng, Lq, Lk)
        mask[0] = first
    else:
        mask = first.expand(B, 1, Lk).clone()
    return Case(steps=[Call(Q, K, V, mask)], grad=False)  # forward only: such scores' gradients are ill-conditioned


@case(targets="a query whose allowed scores are all far below -1e4: masked keys need -inf (or the dtype's minimum), "
              "not a large negative number")
def very_negative_allowed_scores(rng):
    return _allowed_scores_near(rng, -1.5e4)  # -15000 and -16000


@case(targets="a query whose allowed scores are near -100000, below float16's range: masked keys need -inf (or the "
              "minimum of the scores' own dtype), not float16's minimum -65504 in every dtype",
      dtypes=("float32", "bfloat16"))  # float16 cannot hold such scores
def allowed_scores_below_float16_range(rng):
    return _allowed_scores_near(rng, -1e5)


@case(targets="a (batch, 1, Lk) padding mask and allowed scores far below -1e4: padded keys need -inf (or the dtype's "
              "minimum), not (1 - mask) * -10000")
def very_negative_scores_padding_mask(rng):
    return _allowed_scores_near(rng, -1.5e4, form="padding")


@case(targets="a 2-D (Lq, Lk) mask shared by the batch, and allowed scores far below -1e4: -inf (or the dtype's "
              "minimum) for every mask form")
def very_negative_scores_2d_mask(rng):
    return _allowed_scores_near(rng, -1.5e4, form="2d")


@case(targets="one query (a decoding step) with a padding mask, its allowed scores far below -1e4: the same masking "
              "on a single-query path")
def very_negative_scores_single_query(rng):
    return _allowed_scores_near(rng, -1.5e4, form="single")


@case(targets="one query per sequence (a decoding step) with a padding mask and large scores, the largest on a "
              "padded key: mask before a stable softmax on a single-query path too")
def decoding_step_padding_large_scores(rng):
    B, H, Lk, D = 3, 2, 7, 16
    Q, K, V = rng.randn(B, H, 1, D, scale=6.0), rng.randn(B, H, Lk, D, scale=6.0), rng.randn(B, H, Lk, 8)
    K[:, :, -1] = 3 * Q[:, :, 0]  # the last key, padding in every sequence, holds each query's largest score
    mask = torch.zeros(B, 1, 1, Lk, dtype=torch.bool)
    for b, n in enumerate((5, 6, 3)):
        mask[b, ..., :n] = True
    return Case(steps=[Call(Q, K, V, mask)], grad=False)  # forward stability only


@case(targets="a mask buffer all True on the first call, refilled in place with padding for the next: whether a mask "
              "hides anything is read from this call's values, never remembered by the tensor object")
def all_true_mask_refilled(rng):
    Q, K, V = rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8)
    padded = torch.ones(2, 1, 6, dtype=torch.bool)
    padded[0, :, 4:], padded[1, :, 2:] = False, False
    new = (rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8))
    return Case(steps=[Call(Q, K, V, torch.ones(2, 1, 6, dtype=torch.bool)),
                       Call(*(Refill(0, j, t) for j, t in enumerate(new)), Refill(0, 3, padded))],
                grad=False)  # written in place between the calls: a forward property


@case(targets="5-D inputs and odd sizes")
def five_d(rng):
    return Case(steps=[Call(rng.randn(1, 2, 2, 3, 5), rng.randn(1, 2, 2, 13, 5), rng.randn(1, 2, 2, 13, 3))])


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    steps = [Call(rng.randn(2, 4, 8), rng.randn(2, 6, 8), rng.randn(2, 6, 8), _mask(rng, 2, 4, 6)).temporary_inputs()
             for _ in range(4)]
    return Case(steps=steps, grad=False)  # inference


@case(targets="one tensor object passed as Q and K (attention(x, x, v), self-attention without projections), then as Q, K "
              "and V, then as Q and K with a mask that is not symmetric: a shortcut taken when Q is K (the scores are "
              "then symmetric, the mask need not be) is graded here"
              "; then equal values in distinct tensors: each input needs its own gradient (never reuse one for "
              "another because their values are equal)")
def query_is_key(rng):
    x, y, z, w = rng.randn(2, 6, 8), rng.randn(2, 5, 8), rng.randn(2, 7, 8), rng.randn(2, 4, 8)
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 6, 8)), Call(y, Alias(1, 0), Alias(1, 0)),
                       Call(z, Alias(2, 0), rng.randn(2, 7, 8), _mask(rng, 2, 7, 7)),  # a mask that is not symmetric
                       Call(w, w.clone(), w.clone())])  # equal values, three tensors: each needs its own gradient


@case(targets="Q is K (then Q, K and V one object) in an inference loop under torch.no_grad(): a shortcut taken only "
              "when autograd is off is graded here too")
def query_is_key_inference(rng):
    x, y = rng.randn(2, 6, 8), rng.randn(2, 5, 8)
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 6, 8)), Call(y, Alias(1, 0), Alias(1, 0))],
                grad=False)


@benchmark
def bench_inputs(rng, S):
    return Case(steps=[Call(rng.randn(1, 8, S, 64), rng.randn(1, 8, S, 64), rng.randn(1, 8, S, 64))])


@baseline
def fused(Q, K, V, mask=None):
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
