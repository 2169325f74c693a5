"""Hidden cases for flash_attention. When block_size < S no intermediate may hold B x S x S elements."""

import torch

from torchcode.grader.cases import Alias, Call, Case, Fn, Out, Refill, Same, baseline, benchmark, case

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output": ("position", "feature"), "Q": ("position", "feature"), "K": ("position", "feature"),
        "V": ("position", "feature")}

SxS = "the size of the full score matrix"
ALL_KEYS = ("no softmax, max, sum or matrix product may take all S keys of a query at once. Visit the keys one block "
            "at a time and combine the blocks with a running max and a running sum (the online softmax)")


SCALE = ("padding Q and K with zero features (their width Dk -> 4 Dk, every dot product unchanged) should act exactly "
         "as halving the queries, since 1 / sqrt(4 Dk) = 1 / (2 sqrt(Dk)); yours did not. Scale the scores by "
         "1 / sqrt(Dk), Dk the last dim of Q and K (not D unrooted, not the sequence length or the block size)")


def _padded(x, width):
    """``x`` with zero features appended up to ``width``: no dot product changes."""
    return torch.cat([x, torch.zeros(*x.shape[:-1], width - x.shape[-1])], dim=-1)


def flash(rng, B, S, D, block_size=None, scale=1.0):
    return tiled([rng.randn(B, S, D, scale=scale) for _ in range(3)], block_size)


def tiled(args, block_size=None, grad=True):
    """One call on (Q, K, V), with the memory and reduction bounds of a tiled kernel when block_size < S."""
    B, S, D = args[0].shape
    kwargs = {} if block_size is None else {"block_size": block_size}
    bs = 32 if block_size is None else block_size
    limit = B * S * S if bs < S else None
    online = S if 1 < bs < S and D < S else None  # no op may see all S keys of a query at once
    return Case(steps=[Call(*args, **kwargs)], max_intermediate=limit, intermediate_hint=SxS,
                max_reduction=online, reduction_hint=ALL_KEYS, grad=grad)


@case(targets="block_size divides S: tiles, never the full S x S matrix")
def even_blocks(rng):
    return flash(rng, 2, 64, 16, block_size=16)


@case(targets="S between block_size and twice it: two tiles, the second ragged; still no S x S matrix (no plain "
              "softmax for short inputs)")
def two_tiles(rng):
    return flash(rng, 1, 36, 16, block_size=24)  # a shape no other case uses


ONE = ("with every value row the same vector v, your output was not v at every query: each query's weights over all "
       "the keys must sum to 1. When the running max grows, rescale both the running sum and the accumulator by "
       "exp(m_old - m_new), and divide the accumulator by the final sum")


@case(targets="every value row the same vector, the max growing from block to block: the weights still sum to 1")
def weights_sum_to_one(rng):
    B, S, D = 3, 40, 16  # shapes no other case uses: a buffer kept per shape shows in its own case, not here
    v = rng.randn(1, 1, D)
    c = tiled([rng.randn(B, S, D, scale=2.0), rng.randn(B, S, D, scale=2.0), v.expand(B, S, D).clone()], 16,
              grad=False)  # a forward property
    c.checks = [Same(Out(0), Fn(lambda o: v.to(o.dtype).expand_as(o), Out(0)), ONE)]
    return c


@case(targets="the scale follows the head width D: Q and K padded with zero features act as halved queries")
def scale_follows_head_width(rng):
    Q, K, V = (rng.randn(2, 48, 8) for _ in range(3))
    c = tiled([Q / 2, K, V], 16, grad=False)  # a forward property
    c.steps.append(Call(_padded(Q, 32), _padded(K, 32), _padded(V, 32), block_size=16))  # V padded too: one D
    c.checks = [Same(Out(1)[:, :, :8], Out(0), SCALE)]
    return c


@case(targets="ragged last block (block_size does not divide S), here of one key: S = 65 = 4 x 16 + 1")
def ragged_blocks(rng):
    # a last block of a single key: a tile count rounded down (S // block_size + (S % block_size > 1)) drops it
    return flash(rng, 2, 65, 16, block_size=16)


@case(targets="the default block_size of 32: called without block_size, no op may combine more than 32 keys")
def default_block_size(rng):
    c = flash(rng, 1, 70, 8)
    c.max_reduction = 33  # tiles of 32 keys (and a ragged one of 6): a larger default (64, 69) combines more
    c.reduction_hint = ("called without block_size, the contract's default is block_size=32: tiles of at most 32 keys "
                        "(a default of None resolved to another size in the body is another interface)")
    return c


@case(targets="many key blocks: an online softmax over tiles, never a softmax over all keys at once")
def many_key_blocks(rng):
    return flash(rng, 2, 96, 8, block_size=12)


@case(targets="large-magnitude scores: rescale the accumulator when the max grows")
def large_scores(rng):
    return flash(rng, 2, 48, 16, block_size=8, scale=6.0)


@case(targets="the largest scores sit in the ragged last block: rescale the running sum and accumulator there too")
def largest_in_ragged_block(rng):
    B, S, D = 2, 44, 16  # blocks of 16: two full, then a ragged block of 12 keys
    K = rng.randn(B, S, D)
    K[:, 32:] = rng.randn(B, S - 32, D, scale=30.0)  # the last block's scores are ~100x the others
    return tiled([rng.randn(B, S, D, scale=3.0), K, rng.randn(B, S, D)], block_size=16, grad=False)


@case(targets="every score of a row far below 0: start the running max at -inf, not at 0")
def all_scores_negative(rng):
    B, S, D = 2, 40, 16
    Q = (rng.randn(B, S, D).abs() + 1.0) * 4.0  # positive queries, negative keys: every score <= -64
    K = -(rng.randn(B, S, D).abs() + 1.0) * 4.0
    return tiled([Q, K, rng.randn(B, S, D)], block_size=8, grad=False)  # forward stability only


@case(targets="every score near -15000 and S not a multiple of block_size: keys padded up to a whole block must be "
              "masked with -inf (or left out), not with a large negative number such as -1e4")
def very_negative_scores_ragged(rng):
    B, S, D = 2, 22, 16
    u = rng.randn(B, 1, D)
    u = u / u.norm(dim=-1, keepdim=True)  # a unit direction per batch element
    Q = (2 * u).expand(B, S, D).clone()
    K = -3e4 * u + rng.randn(B, S, D)  # every score is -15000 + (u . noise) / 2; a zero key would score 0
    return tiled([Q, K, rng.randn(B, S, D)], block_size=8, grad=False)  # forward stability only


@case(targets="block_size >= S with large-magnitude scores: a single tile needs the same stable softmax")
def one_tile_large_scores(rng):
    c = flash(rng, 2, 20, 16, block_size=32, scale=10.0)
    c.grad = False  # forward stability only
    return c


@case(targets="every score near -100000, below float16's range: start the running max at -inf (or the minimum of "
              "the scores' own dtype), not at float16's minimum -65504 in every dtype", dtypes=("float32", "bfloat16"))
def all_scores_below_float16_range(rng):  # float16 cannot hold such scores
    B, S, D = 2, 24, 16
    u = rng.randn(B, 1, D)
    u = u / u.norm(dim=-1, keepdim=True)  # a unit direction per batch element
    Q = (2 * u).expand(B, S, D).clone()
    K = -2e5 * u + rng.randn(B, S, D)  # every score is -100000 + (u . noise) / 2
    return tiled([Q, K, rng.randn(B, S, D)], block_size=8, grad=False)  # forward stability only


LOW = ("in bfloat16 and float16, keep the running max, sum and accumulator in float32 (as FlashAttention's kernels "
       "do) and cast the output back at the end. Kept in the inputs' dtype, a running sum near 1 stops growing once a "
       "tile adds less than half the step between numbers near 1 (1/128 in bfloat16): over many small tiles that lost "
       "weight shows")


def small_tiles(rng, gap, S=256):
    """Tiles of 16 keys (16 of them by default): key 0 scores ``gap`` above the other keys, whose values point the other way; then the
    same keys in reverse order (the dominant one last).

    After the dominant key's tile each later tile adds ~16 exp(-gap) to a running sum near 1: kept in the inputs'
    dtype, that is under half the step between numbers there and is lost tile after tile, so the output leans towards
    V[0] by ~7% (the lean rule sees it: rounding leans neither way). 16 x 16 tiles keep a tiled kernel fast."""
    B, D = 1, 64
    u = rng.randn(B, 1, D).sign() / D ** 0.5  # a unit direction spread over every feature: every query along u
    Q = D ** 0.5 * u * (1.0 + 0.02 * rng.randn(B, S, 1))  # a score is then ~ (k . u)
    noise = 0.3 * rng.randn(B, S, D)
    K = noise - (noise * u).sum(-1, keepdim=True) * u + (0.2 * rng.randn(B, S, 1) - gap / 2) * u
    K[:, 0] += gap * u[:, 0]  # key 0 scores ~gap / 2, every other key ~ -gap / 2
    w = rng.randn(B, 1, D)
    V = -w + 0.3 * rng.randn(B, S, D)
    V[:, 0] = 2 * w[:, 0]  # what the dominant key brings against what all the others bring
    c = tiled([Q, K, V], block_size=16, grad=False)  # a forward property
    c.steps.append(Call(Q, K.flip(1), V.flip(1), block_size=16))  # the dominant key in the last tile: visited last by
    return c  # a kernel walking the tiles in order, first by one walking them backwards


@case(targets="one dominant key, then many tiles of small weights (and the same keys reversed): every tile counts, "
              "however small its weights; none may be skipped", dtypes=("float32",))
def small_weight_tiles(rng):
    return small_tiles(rng, gap=12.0, S=240)  # the other keys weigh ~6e-6 each: 239 of them move the output ~0.1%


@case(targets="bfloat16, one dominant key then many small tiles (and the same keys reversed): " + LOW,
      dtypes=("bfloat16",))
def many_small_tiles_bfloat16(rng):
    return small_tiles(rng, gap=8.6)  # each later tile adds ~0.003 to a sum near 1: under bfloat16's half step 0.0039


@case(targets="float16, one dominant key then many small tiles (and the same keys reversed): "
              + LOW.replace("1/128 in bfloat16", "1/1024 in float16"), dtypes=("float16",))
def many_small_tiles_float16(rng):
    return small_tiles(rng, gap=10.7)  # each later tile adds ~0.00036 to a sum near 1: under float16's half step 0.00049


@case(targets="block_size = 1")
def block_of_one(rng):
    return flash(rng, 1, 9, 4, block_size=1)


@case(targets="a single token")
def single_token(rng):
    # forward only: with one key the gradient of Q and K is exactly 0, and a correct kernel that treats the running
    # max as a constant (no gradient through it) leaves a bfloat16 rounding unit of noise there
    return tiled([rng.randn(2, 1, 8) for _ in range(3)], block_size=4, grad=False)


@case(targets="block_size >= S: a single tile; called twice with the same shapes, the first result must stay what "
              "it was (a buffer kept between calls and returned is overwritten by the next call)")
def one_tile(rng):
    c = flash(rng, 2, 20, 8, block_size=32)
    c.steps.append(Call(*[rng.randn(2, 20, 8) for _ in range(3)], block_size=32))
    return c


@case(targets="block_size = 2**30 ('one tile, whatever S'): nothing may be sized by block_size itself (pad or "
              "allocate by min(block_size, S))")
def huge_block_size(rng):
    return flash(rng, 2, 12, 8, block_size=2 ** 30)


@case(targets="one set of buffers reused by the caller: the same Q, K, V objects, refilled in place with new values, "
              "need the new answer (nothing may be kept by the tensors' id() or data_ptr())")
def buffers_refilled(rng):
    c = flash(rng, 2, 40, 8, block_size=16)
    c.steps.append(Call(*(Refill(0, j, rng.randn(2, 40, 8)) for j in range(3)), block_size=16))
    c.grad = False  # Q, K, V are written into between the calls: a forward property
    return c


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    c = tiled([rng.randn(2, 40, 8) for _ in range(3)], block_size=16, grad=False)  # inference
    c.steps += [Call(*(rng.randn(2, 40, 8) for _ in range(3)), block_size=16) for _ in range(3)]
    for s in c.steps:
        s.temporary_inputs()
    return c


@case(targets="one tensor object passed as Q and K (attention(x, x, v), self-attention without projections), then as Q, K "
              "and V: a shortcut taken when Q is K (the scores are then symmetric) is graded here"
              "; then equal values in distinct tensors: each input needs its own gradient (never reuse one for "
              "another because their values are equal)")
def query_is_key(rng):
    x, y = rng.randn(2, 40, 16), rng.randn(2, 37, 16)
    w = rng.randn(2, 21, 16)  # equal values in three tensors: each needs its own gradient
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 40, 16), 16), Call(y, Alias(1, 0), Alias(1, 0), 16),
                       Call(w, w.clone(), w.clone(), 16)])


@case(targets="a query of zeros and a key of zeros (padding embeddings), S not a multiple of block_size: a score of "
              "exactly 0 is an ordinary score, never a padded key's")
def zero_query_and_key(rng):
    Q, K, V = rng.randn(2, 20, 8), rng.randn(2, 20, 8), rng.randn(2, 20, 8)
    Q[:, 1] = 0.0  # every score of query 1 is exactly 0: uniform weights over all keys
    K[:, 2] = 0.0  # key 2 scores exactly 0 for every query
    return Case(steps=[Call(Q, K, V, 8)])


@case(targets="Q is K (then Q, K and V one object) in an inference loop under torch.no_grad(): a shortcut taken only "
              "when autograd is off is graded here too")
def query_is_key_inference(rng):
    x, y = rng.randn(2, 40, 16), rng.randn(2, 37, 16)
    return Case(steps=[Call(x, Alias(0, 0), rng.randn(2, 40, 16), 16), Call(y, Alias(1, 0), Alias(1, 0), 16)],
                grad=False)


@benchmark
def bench_inputs(rng, S):
    return Case(steps=[Call(rng.randn(1, S, 64), rng.randn(1, S, 64), rng.randn(1, S, 64), block_size=64)])


@baseline
def fused(Q, K, V, block_size=32):
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V)
