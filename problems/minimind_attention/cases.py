"""Hidden cases for minimind_attention."""

import torch

from torchcode.grader.cases import Call, Case, Cat, Config, Const, Fn, Out, Prev, Refill, Same, case, differs

# the names of the last dimensions of each output and input, for messages ("query positions 0, 1 are wrong")
DIMS = {"output[0]": ("batch element", "position", "feature"),
        "output[1]": ("batch element", "position", "KV head", "feature"), "x": ("batch element", "position", "feature"),
        "position_embeddings": ("position", "feature"), "past_key_value": ("batch element", "position", "KV head", "feature")}

FUTURE = "changing later tokens changed earlier outputs: attention must be causal over absolute positions"
MATCH_FULL = ("prefill/decoding with past_key_value gave different outputs than one full forward: check the causal "
              "mask offset and that cached keys are stored after RoPE")
CACHE_FULL = ("the returned past_kv differs from the keys/values of one full forward: cache keys after RoPE, "
              "before repeating heads, concatenated along dim 1")


def config(hidden=64, heads=8, kv=2, flash=False, dropout=0.0):
    # the contract's fields, plus two that MiniMindConfig also has and layers read (head_dim is the contract's
    # hidden_size // num_attention_heads): a layer copied from MiniMind builds, and is judged on what it computes
    return Config(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv, dropout=dropout,
                  flash_attn=flash, head_dim=hidden // heads, rms_norm_eps=1e-6)


def rope_tables(S, head_dim, theta=10000.0, dtype=torch.float32):
    """MiniMind's precomputed cos/sin: (S, head_dim), rotate-half layout."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.outer(torch.arange(S, dtype=torch.float64), inv)
    return torch.cat([ang.cos()] * 2, -1).to(dtype), torch.cat([ang.sin()] * 2, -1).to(dtype)


def pe(cos, sin, start, end):
    return (Const(cos[start:end]), Const(sin[start:end]))


def future_check(rng, cfg, hd, B, S, t):
    cos, sin = rope_tables(S, hd)
    x = rng.randn(B, S, cfg.fields["hidden_size"])
    x2 = x.clone()
    x2[:, t + 1:] = rng.randn(B, S - t - 1, cfg.fields["hidden_size"])
    return Case(init=dict(config=cfg), steps=[Call(x, pe(cos, sin, 0, S)), Call(x2, pe(cos, sin, 0, S))],
                checks=[Same(Out(1, 0)[:, : t + 1], Out(0, 0)[:, : t + 1], FUTURE)])


def chunks_then_full(rng, cfg, hd, B, sizes, tables=None, train=False, x=None):
    """Consecutive chunks of one sequence, each continuing the previous past_kv, then one full forward."""
    S = sum(sizes)
    cos, sin = tables or rope_tables(S, hd)
    x = rng.randn(B, S, cfg.fields["hidden_size"]) if x is None else x
    steps, start = [], 0
    for i, n in enumerate(sizes):
        steps.append(Call(x[:, start:start + n], pe(cos, sin, start, start + n),
                          past_key_value=Prev(i - 1, 1) if i else None, use_cache=True))
        start += n
    steps.append(Call(x, pe(cos, sin, 0, S), use_cache=True))
    last, full = len(sizes) - 1, len(sizes)
    return Case(init=dict(config=cfg), steps=steps, train=train, checks=[
        Same(Cat([Out(i, 0) for i in range(len(sizes))], dim=1), Out(full, 0), MATCH_FULL),
        Same(Out(last, 1, 0), Out(full, 1, 0), CACHE_FULL),
        Same(Out(last, 1, 1), Out(full, 1, 1), CACHE_FULL),
    ])


@case(targets="GQA (8 heads, 2 KV heads), causal, use_cache=False returns None")
def gqa_causal(rng):
    return future_check(rng, config(), 8, B=2, S=7, t=3)


@case(targets="MHA (num_key_value_heads=None) on the flash path")
def mha_flash(rng):
    return future_check(rng, config(hidden=32, heads=4, kv=None, flash=True), 8, B=2, S=6, t=2)


@case(targets="MHA (num_key_value_heads=None) on the slow path (flash_attn=False): as many KV heads as heads")
def mha_slow(rng):
    return future_check(rng, config(hidden=32, heads=4, kv=None, flash=False), 8, B=2, S=6, t=2)


@case(targets="prefill, then decode steps with past_key_value == one full forward; each call's (cos, sin) hold the rows "
              "of its own tokens only (already offset by the cache length): apply them as given, never slice them again")
def prefill_then_decode(rng):
    return chunks_then_full(rng, config(), 8, B=2, sizes=[5, 1, 1])


@case(targets="chunked prefill on the flash path: the causal mask needs the cache offset; a last chunk of 33 new "
              "tokens on a cache of 32 (65 keys), then all 65 at once: the last token, alone past 64 (or 32), counts")
def chunked_prefill_flash(rng):
    # 33 new tokens, 65 keys and 65 positions: one past a whole number of chunks of 2..32 (2..64), so a chunk count
    # rounded down drops the last new token or key
    return chunks_then_full(rng, config(hidden=48, heads=6, kv=3, flash=True), 8, B=1, sizes=[3, 29, 33])


def padded_prompt_then_decode(rng, cfg, hd, lengths, S, new_tokens=1):
    """Right-padded prompts, then ``new_tokens`` more tokens per sequence; the pads must stay invisible."""
    B, hidden, n = len(lengths), cfg.fields["hidden_size"], new_tokens
    cos, sin = rope_tables(S + n, hd)
    mask = torch.zeros(B, S, dtype=torch.long)
    for b, length in enumerate(lengths):
        mask[b, :length] = 1
    padded = (mask == 0)[:, :, None]  # (B, S, 1): outputs at padded positions are not graded
    grown = torch.cat([mask, torch.ones(B, n, dtype=torch.long)], dim=1)  # the new tokens are real
    x, new = rng.randn(B, S, hidden), rng.randn(B, n, hidden)
    x2 = torch.where(padded, rng.randn(B, S, hidden), x)  # same real tokens, other padding
    steps = []
    for prompt in (x, x2):
        first = len(steps)
        steps += [Call(prompt, pe(cos, sin, 0, S), use_cache=True, attention_mask=mask).ungraded(padded, 0),
                  Call(new, pe(cos, sin, S, S + n), past_key_value=Prev(first, 1), use_cache=True, attention_mask=grown)]
    because = ("changing only padding tokens changed the output of a generated token: keys where attention_mask is 0 "
               "must never be attended, also when they sit in the cache" + (
                   " and several new tokens come at once (the causal mask alone does not hide padding in the cache)"
                   if n > 1 else ""))
    return Case(init=dict(config=cfg), steps=steps, checks=[Same(Out(3, 0), Out(1, 0), because)])


@case(targets="zero tokens on the flash path: a zero token has a zero query and key (no biases; RoPE keeps 0 at "
              "0), and a visible score of exactly 0 is a score like any other (mask by position, never by the "
              "score's value)")
def zero_query_and_key_flash(rng):
    x = rng.randn(2, 8, 32)
    x[:, 1] = 0.0  # token 1's key is 0: every later token scores exactly 0 on it, from the cache
    x[:, 5] = 0.0  # token 5 (in the second chunk) scores exactly 0 on every key it sees
    return chunks_then_full(rng, config(hidden=32, heads=4, kv=2, flash=True), 8, B=2, sizes=[3, 4, 1], x=x)


@case(targets="a past_key_value past 256 tokens, then new tokens at positions 250..261, then all 262 in one prefill: "
              "positions must be counted "
              "exactly; bfloat16 holds whole numbers exactly only up to 256 (257 rounds to 256, so a token would see "
              "the next one): build positions with an int64 torch.arange (its default), not in the activations' "
              "dtype nor in a narrow integer type (int8 wraps past 127)",
      dtypes=("float32", "bfloat16"))  # float16 counts exactly that far; float32 (the CPU default) shows positions kept
      # in a narrow integer type (int8 wraps past 127, uint8 past 255)
def long_cache_positions(rng, flash=False):
    H, past, S, t = 4, 250, 262, 256
    x = rng.randn(1, S, H)
    u = rng.randn(H)
    u = u / u.norm()
    x[0, t], x[0, t + 1] = 4 * u, 8 * u  # q_proj = k_proj = I: token 256's score on token 257 is 32 / 2 = 16, if seen
    tables = torch.ones(S, H), torch.zeros(S, H)  # cos 1, sin 0: no rotation, so that score stays 16
    eye = torch.eye(H)
    steps = [Call(x[:, :past], pe(*tables, 0, past), use_cache=True),
             Call(x[:, past:], pe(*tables, past, S), past_key_value=Prev(0, 1), use_cache=True),
             Call(x, pe(*tables, 0, S), use_cache=True)]  # and all 262 tokens in one prefill
    return Case(init=dict(config=config(hidden=H, heads=1, kv=1, flash=flash)), steps=steps, grad=False,  # forward only
                weights={"q_proj.weight": eye, "k_proj.weight": eye})


@case(targets="the flash path past 256 tokens: a past_key_value of 250, new tokens at positions 250..261, then all "
              "262 in one prefill: count positions exactly with an int64 torch.arange on the flash path too (a causal "
              "mask built there in bfloat16 or uint8 lets a token see the next one)", dtypes=("float32", "bfloat16"))
def long_cache_positions_flash(rng):
    return long_cache_positions(rng, flash=True)


@case(targets="a very long past_key_value: a prefill of 3, a chunk of 4094 new tokens, then one decode step (4098 "
              "keys, past the 1024, 2048 or 4096 positions a mask buffer is often built for in __init__): build the "
              "mask for the lengths you are given", dtypes=("float32",))
def very_long_cache(rng, flash=False):
    cos, sin = rope_tables(4098, 4)
    x = rng.randn(1, 4098, 4)
    # no full forward after (each call is compared with the reference's): a token-by-token loop stays in its time
    steps, bounds = [], [(0, 3), (3, 4097), (4097, 4098)]
    for i, (a, b) in enumerate(bounds):
        steps.append(Call(x[:, a:b], pe(cos, sin, a, b), past_key_value=Prev(i - 1, 1) if i else None, use_cache=True))
    return Case(init=dict(config=config(hidden=4, heads=1, kv=1, flash=flash)), steps=steps,
                grad=False,  # forward only: the mask is what it tests (any dtype shows it)
                time_factor=4)  # 4099 tokens: a correct loop over small tiles is many ops, each paying the guards


@case(targets="a very long past_key_value on the flash path: a chunk of 4094 new tokens on a cache of 3, one decode "
              "step, then all 4098 at once", dtypes=("float32",))
def very_long_cache_flash(rng):
    return very_long_cache(rng, flash=True)


@case(targets="right-padded prompts, then decoding: padded keys in the cache are never attended")
def right_padding(rng):
    return padded_prompt_then_decode(rng, config(flash=False), 8, lengths=[6, 4, 2], S=6)


@case(targets="right-padded prompts of 300 tokens, the first 100 long and the last 180: a whole tile of 128 keys is "
              "padding in one sequence and real in another (padding is per sequence), then decoding", dtypes=("float32",))
def long_padded_batch(rng):
    return padded_prompt_then_decode(rng, config(hidden=16, heads=2, kv=1), 8, lengths=[100, 300, 180], S=300)


@case(targets="right padding on the flash path, one KV head")
def padding_flash(rng):
    return padded_prompt_then_decode(rng, config(hidden=32, heads=4, kv=1, flash=True), 8, lengths=[3, 5], S=5)


@case(targets="one right-padded prompt alone (a batch of one), then decoding: padding is not only for batches of "
              "several lengths (attention_mask says which keys are real whatever the batch size)")
def padded_batch_of_one(rng):
    return padded_prompt_then_decode(rng, config(), 8, lengths=[4], S=6)


@case(targets="one right-padded prompt alone on the flash path, then a chunk of 2 tokens")
def padded_batch_of_one_flash(rng):
    return padded_prompt_then_decode(rng, config(hidden=32, heads=4, kv=2, flash=True), 8, lengths=[3], S=5,
                                     new_tokens=2)


@case(targets="a long prompt with a single padded slot, then decoding: even one padded key in 16 is never attended")
def barely_padded_prompt_then_decode(rng):
    return padded_prompt_then_decode(rng, config(), 8, lengths=[16, 15], S=16)


@case(targets="right-padded prompts, then a chunk of 3 tokens at once: padding in the cache stays invisible to every "
              "new token (the causal mask alone does not hide it)")
def padded_prompt_then_chunk(rng):
    return padded_prompt_then_decode(rng, config(flash=False), 8, lengths=[6, 3], S=6, new_tokens=3)


@case(targets="right padding on the flash path, then a chunk of 3 tokens at once")
def padded_prompt_then_chunk_flash(rng):
    return padded_prompt_then_decode(rng, config(hidden=32, heads=4, kv=2, flash=True), 8, lengths=[2, 5], S=5,
                                     new_tokens=3)


@case(targets="flash path: a chunk of 3 tokens reads past_key_value with use_cache=False (the cache is read whatever "
              "use_cache says; a causal mask aligned at the top-left corner hides most of the cache)")
def past_without_use_cache_flash(rng):
    cos, sin = rope_tables(8, 8)
    x = rng.randn(2, 8, 48)
    steps = [Call(x[:, :5], pe(cos, sin, 0, 5), use_cache=True),
             Call(x[:, 5:], pe(cos, sin, 5, 8), past_key_value=Prev(0, 1), use_cache=False),
             Call(x, pe(cos, sin, 0, 8))]
    return Case(init=dict(config=config(hidden=48, heads=6, kv=3, flash=True)), steps=steps,
                checks=[Same(Out(1, 0), Out(2, 0)[:, 5:], MATCH_FULL)])


OWN_PAST = ("a continuation from past_key_value gave other outputs than one full forward over those tokens: attend "
            "over the past_key_value you are handed (the caller may branch, or continue on another layer with the "
            "same weights), and keep no history of earlier calls on self")
EVAL_DROPOUT = ("the same input twice in eval mode gave different outputs: dropout must be off in eval mode "
                "(nn.Dropout follows self.training; for the fused kernel pass dropout_p=self.dropout if self.training "
                "else 0.0)")
EVAL_AFTER_TRAINING = ("in eval mode after training steps on the same layer, the same input gave other outputs: read "
                       "self.training at each call (model.eval() switches it off), never keep the dropout of the first "
                       "call")
DROPPED = ("the same input twice in training mode with dropout 0.5 gave identical outputs: apply dropout with "
           "p = config.dropout while self.training, on both paths (nn.Dropout, or dropout_p= on the fused kernel)")
DROPPED_ON_PAST = ("the same {what} twice on one past_key_value, in training mode with dropout 0.5, gave identical "
                   "outputs: apply dropout at every call while self.training, with a cache or without, whatever the "
                   "number of new tokens (a one-token fast path, or a cached path, that leaves dropout out is wrong "
                   "in training)")


@case(targets="dropout in the config, eval mode: no dropout applied")
def dropout_in_eval(rng):
    cos, sin = rope_tables(5, 8)
    x = rng.randn(2, 5, 64)
    return Case(init=dict(config=config(dropout=0.3)), steps=[Call(x, pe(cos, sin, 0, 5)), Call(x, pe(cos, sin, 0, 5))],
                checks=[Same(Out(1, 0), Out(0, 0), EVAL_DROPOUT)])


@case(targets="one token, batch 1; another layer with other head counts is built beside it (a model builds all its "
              "layers first): each layer keeps its own settings on self, not on the class")
def single_token(rng):
    cos, sin = rope_tables(1, 16)
    return Case(init=dict(config=config(hidden=64, heads=4, kv=2)), steps=[Call(rng.randn(1, 1, 64), pe(cos, sin, 0, 1))],
                sibling=dict(config=config(hidden=64, heads=8, kv=1)))


@case(targets="large activations with a cache: a stable softmax on both paths; the last step reads past_key_value "
              "with use_cache=False (the cache is read whatever use_cache says; it only decides what is returned)")
def large_scores(rng):
    cos, sin = rope_tables(6, 8)
    x = rng.randn(2, 6, 64, scale=15.0)
    steps = [Call(x[:, :5], pe(cos, sin, 0, 5), use_cache=True),
             Call(x[:, 5:], pe(cos, sin, 5, 6), past_key_value=Prev(0, 1), use_cache=False)]
    return Case(init=dict(config=config()), steps=steps, grad=False)  # forward stability only


@case(targets="large activations over 300 tokens and a decode step (more than two tiles of 128 keys): each row "
              "rescaled when its own running max grows", dtypes=("float32",))
def large_scores_long(rng):
    cos, sin = rope_tables(301, 8)
    x = rng.randn(1, 301, 16, scale=15.0)
    steps = [Call(x[:, :300], pe(cos, sin, 0, 300), use_cache=True),
             Call(x[:, 300:], pe(cos, sin, 300, 301), past_key_value=Prev(0, 1), use_cache=True)]
    return Case(init=dict(config=config(hidden=16, heads=2, kv=1)), steps=steps, grad=False)  # forward stability only


@case(targets="the caller's cos/sin from theta 1e6 (MiniMind's own): use position_embeddings, never rebuild RoPE")
def rope_theta_1e6(rng):
    return chunks_then_full(rng, config(flash=True), 8, B=2, sizes=[4, 3, 1], tables=rope_tables(8, 8, theta=1e6))


@case(targets="cos/sin that come from no theta at all: apply exactly the tables you are given (slow path, a prefill "
              "of 32, then a chunk of 33 new tokens over 65 keys, then all 65 at once: the last token, alone past 64 "
              "(or 32), counts)")
def rope_arbitrary_tables(rng):
    angles = rng.uniform(65, 8, low=-3.14159, high=3.14159)  # (S, head_dim / 2): any rotation per position and pair
    tables = torch.cat([angles.cos()] * 2, dim=-1), torch.cat([angles.sin()] * 2, dim=-1)
    # 33 new tokens, 65 keys and 65 positions on the slow path (flash_attn=False): one past a whole number of chunks
    # of 2..32 (2..64), so a chunk count rounded down drops the last new token or key
    return chunks_then_full(rng, config(hidden=64, heads=4, kv=2), 16, B=2, sizes=[32, 33], tables=tables)


@case(targets="dropout in the config, eval mode, fast path (prefill and chunks): no dropout applied")
def flash_dropout_in_eval(rng):
    c = chunks_then_full(rng, config(flash=True, dropout=0.5), 8, B=2, sizes=[4, 3])
    c.steps.append(Call(*c.steps[-1].args, **c.steps[-1].kwargs))  # the full forward once more: same input
    c.checks.insert(0, Same(Out(3, 0), Out(2, 0), EVAL_DROPOUT))
    return c


@case(targets="training mode with dropout 0.0, fast path: training changes nothing else")
def train_without_dropout(rng):
    return chunks_then_full(rng, config(hidden=32, heads=4, kv=2, flash=True), 8, B=2, sizes=[3, 2], train=True)


@case(targets="training mode with dropout 0.0, slow path: the dropout of config.dropout, not a fixed p")
def train_without_dropout_slow(rng):
    return chunks_then_full(rng, config(hidden=32, heads=4, kv=2), 8, B=2, sizes=[3, 2], train=True)



def dropout_in_training(rng, flash):
    """The same prompt twice in training mode, then the same chunk of two tokens twice and the same one token twice on
    its past_key_value: each pair's dropout draws differ (training on a cached continuation drops too, and a one-token
    call is no decoding-only fast path); the returned caches must not be dropped. (Two correct draws are identical
    with a chance of 2^-32 or less: the one token alone sees 5 keys, in 8 heads, for 2 sequences.)"""
    cos, sin = rope_tables(6, 8)
    x = rng.randn(2, 6, 64)
    everything = torch.ones(1, 1, 1, dtype=torch.bool)  # random values: compared with each other, not with a reference
    steps = []
    for _ in range(2):
        steps.append(Call(x[:, :4], pe(cos, sin, 0, 4), use_cache=True).ungraded(everything, 0))
    for end in (6, 6, 5, 5):  # the chunk of 4..5 twice, then the token at 4 twice
        steps.append(Call(x[:, 4:end], pe(cos, sin, 4, end), past_key_value=Prev(0, 1), use_cache=True)
                     .ungraded(everything, 0))
    one = Fn(lambda a: torch.ones((), dtype=a.dtype), Out(0, 0))
    return Case(init=dict(config=config(flash=flash, dropout=0.5)), steps=steps, train=True, grad=False,
                checks=[Same(Fn(differs, Out(0, 0), Out(1, 0)), one, DROPPED),
                        Same(Fn(differs, Out(2, 0), Out(3, 0)), one, DROPPED_ON_PAST.format(what="chunk of two tokens")),
                        Same(Fn(differs, Out(4, 0), Out(5, 0)), one, DROPPED_ON_PAST.format(what="one token"))])


@case(targets="training mode, dropout 0.5, slow path: dropout is applied (the same input twice differs), not to the cache")
def dropout_in_training_slow(rng):
    return dropout_in_training(rng, flash=False)


@case(targets="training mode, dropout 0.5, fast path: pass dropout_p=config.dropout while training")
def dropout_in_training_flash(rng):
    return dropout_in_training(rng, flash=True)


KEEPS_EXPECTATION = ("in training mode with dropout {p}, the average over many draws is not what eval mode gives: "
                     "dropout must keep each output's expectation. Keep each weight with probability 1 - p and scale "
                     "what it keeps by 1 / (1 - p) (nn.Dropout and dropout_p= do), and drop attention weights after "
                     "the softmax (or the layer's output)")


def dropout_expectation(rng, flash, p=0.5):
    """1024 copies of one sequence in training mode. With q_proj = 0 every query weighs its visible keys equally, and
    with v_proj = o_proj = I the eval output at position t is the mean of x over positions 0..t: the mean of the
    copies' outputs must be that (its least-squares scale on it within 0.1 of 1: at p = 0.5 a correct kernel's spreads
    by 0.010, measured over 3000 draws, so 0.1 is 9.6 of those; a missing 1 / (1 - p) gives 0.5). At p = 0.2 the
    spread is half that (a kept weight's variance p / (1 - p) is 1/4 of p = 0.5's): 0.0049 over 3000 draws in each
    of float32, bfloat16 and float16 (the largest deviation 0.021), so 0.1 is 20 of those; a missing 1 / (1 - p)
    gives 0.8, and keeping with probability p instead of 1 - p gives p / (1 - p) = 0.25 (at p = 0.5, p and 1 - p are
    the same keep probability: only another p tells them apart). All scores are 0 here, so dropout on the scores
    before the softmax changes nothing here (dropout_on_weights catches that)."""
    N, S, H = 1024, 5, 32
    cos, sin = rope_tables(S, H // 4)
    seq = rng.randn(1, S, H)
    want = seq.double().cumsum(1) / torch.arange(1, S + 1, dtype=torch.float64).reshape(1, S, 1)  # (1, S, H)
    eye = torch.eye(H)

    def kept(out):  # 1.0 if the copies' mean keeps eval mode's output, else 0.0
        scale = (out.double().mean(0, keepdim=True) * want).sum() / (want * want).sum()
        return ((scale - 1).abs() < 0.1).to(out.dtype)

    everything = torch.ones(1, 1, 1, dtype=torch.bool)  # random values: judged by their mean alone
    one = Fn(lambda a: torch.ones((), dtype=a.dtype), Out(0, 0))
    return Case(init=dict(config=config(hidden=H, heads=4, kv=4, flash=flash, dropout=p)), train=True, grad=False,
                weights={"q_proj.weight": torch.zeros(H, H), "v_proj.weight": eye, "o_proj.weight": eye},
                steps=[Call(seq.expand(N, S, H).clone(), pe(cos, sin, 0, S)).ungraded(everything, 0)],
                checks=[Same(Fn(kept, Out(0, 0)), one, KEEPS_EXPECTATION.format(p=p))])


@case(targets="training mode, dropout 0.5, slow path: dropout keeps the expectation (the mean of 1024 draws is eval "
              "mode's output)")
def dropout_keeps_expectation(rng):
    return dropout_expectation(rng, flash=False)


@case(targets="training mode, dropout 0.5, fast path: dropout keeps the expectation")
def dropout_keeps_expectation_flash(rng):
    return dropout_expectation(rng, flash=True)


@case(targets="training mode, dropout 0.2, slow path: dropout keeps each weight with probability 1 - p (not p) and "
              "keeps the expectation")
def dropout_keeps_expectation_p02(rng):
    return dropout_expectation(rng, flash=False, p=0.2)


ON_WEIGHTS = ("in training mode with dropout 0.5, a token whose one large score gives it all the weight still "
              "averaged a share of its neighbour over many draws: drop attention weights after the softmax (or the "
              "layer's output), not scores before it (a dropped score becomes 0, which moves weight to other keys)")


@case(targets="training mode, dropout 0.5, slow path: dropout on the attention weights, not on the scores (over many "
              "draws a token that scores 20 on itself and 0 on its neighbour still reads itself alone)")
def dropout_on_weights(rng):
    """4096 copies of two tokens, x0 = a e0 and x1 = b e1 (one head of width 8, RoPE tables of cos 1 and sin 0,
    k_proj = v_proj = o_proj = I, q_proj = c I): token 1 scores 20 on itself and 0 on token 0, so in eval mode it reads
    x1 alone. Dropout on its weights keeps that in expectation; dropout on its scores drops the 20 to 0 half the time,
    and the mean then reads x0 by a quarter (a relative error of 0.25; a correct kernel's mean is off by ~0.02, at most
    0.05 over 40 seeds). 4096, not more: a correct kernel that loops over the batch in Python takes ~2 s here."""
    N, H = 4096, 8
    a, b = (float(v) for v in rng.uniform(2, low=1.0, high=2.0))
    seq = torch.zeros(1, 2, H)
    seq[0, 0, 0], seq[0, 1, 1] = a, b
    c = 20.0 * H ** 0.5 / b ** 2  # token 1's score on itself: c b^2 / sqrt(H) = 20
    w = torch.softmax(torch.tensor([0.0, 20.0], dtype=torch.float64), 0)
    want = torch.stack([seq[0, 0].double(), w[0] * seq[0, 0].double() + w[1] * seq[0, 1].double()])[None]  # (1, 2, H)
    eye = torch.eye(H)

    def on_weights(out):  # 1.0 if the copies' mean reads what eval mode reads, else 0.0
        err = (out.double().mean(0, keepdim=True) - want).norm() / want.norm()
        return (err < 0.15).to(out.dtype)

    everything = torch.ones(1, 1, 1, dtype=torch.bool)  # random values: judged by their mean alone
    one = Fn(lambda t: torch.ones((), dtype=t.dtype), Out(0, 0))
    tables = (Const(torch.ones(2, H)), Const(torch.zeros(2, H)))
    return Case(init=dict(config=config(hidden=H, heads=1, kv=1, dropout=0.5)), train=True, grad=False,
                weights={"q_proj.weight": c * eye, "k_proj.weight": eye, "v_proj.weight": eye, "o_proj.weight": eye},
                steps=[Call(seq.expand(N, 2, H).clone(), tables).ungraded(everything, 0)],
                checks=[Same(Fn(on_weights, Out(0, 0)), one, ON_WEIGHTS)])


def _own_score(rng, score, flash=False):
    """With k_proj = -q_proj, query head 0's one visible score (on key 0) is `score` (negative)."""
    a = (-2 * score) ** 0.5  # hidden 8, 2 heads of width 4, one KV head: query head 0 scores -a^2 / 2 on key 0
    x = rng.randn(2, 6, 2, 4)
    x = (x / x.norm(dim=-1, keepdim=True)).reshape(2, 6, 8)  # head slices of norm 1
    cos, sin = rope_tables(6, 4)  # position 0 is not rotated
    # Only the first token's row is graded: later rows mix several scores of this size, and a correct
    # kernel's low-precision rounding (hundreds, near 1e5 in bfloat16) moves them by more than any tolerance.
    later = torch.arange(5)[None, :, None] > 0
    steps = [Call(x[:, :5], pe(cos, sin, 0, 5), use_cache=True).ungraded(later, 0),
             Call(x[:, 5:], pe(cos, sin, 5, 6), past_key_value=Prev(0, 1), use_cache=True)
             .ungraded(torch.ones(1, 1, 1, dtype=torch.bool), 0)]
    return Case(init=dict(config=config(hidden=8, heads=2, kv=1, flash=flash)), steps=steps, grad=False,  # forward only
                weights={"q_proj.weight": a * torch.eye(8), "k_proj.weight": -a * torch.eye(4, 8)})


@case(targets="a chunk of two tokens on past_key_value, the first seeing only keys it scores far below -1e4: mask "
              "the chunk's future keys with -inf (or the dtype's minimum) on the cached path too")
def very_negative_scores_in_a_cached_chunk(rng):
    a = (2 * 1.5e4) ** 0.5  # hidden 8, 2 heads of width 4, one KV head: query head 0 scores -a^2 / 2 on a copy of itself
    x = rng.randn(2, 4, 2, 4)
    x = (x / x.norm(dim=-1, keepdim=True)).reshape(2, 4, 8)  # head slices of norm 1
    # token 1 sees keys 0 and 1, along one direction: it scores -16000 on key 0 and -17067 on its own key, so key 0
    # takes all the weight (the weights' sum is then exact however a correct softmax is written: exp(s - logsumexp(s))
    # loses 1e-3 near -15000 in float32 where two scores tie). Token 2 is its future
    x[:, 1] = x[:, 0] * (16 / 15)
    cos, sin = torch.ones(4, 4), torch.zeros(4, 4)  # angles 0: no rotation, so the copies score alike
    later = torch.tensor([False, True])[None, :, None]  # token 2's row mixes scores of this size: not graded
    steps = [Call(x[:, :1], pe(cos, sin, 0, 1), use_cache=True),
             Call(x[:, 1:3], pe(cos, sin, 1, 3), past_key_value=Prev(0, 1), use_cache=True).ungraded(later, 0)]
    return Case(init=dict(config=config(hidden=8, heads=2, kv=1)), steps=steps, grad=False,  # forward only
                weights={"q_proj.weight": a * torch.eye(8), "k_proj.weight": -a * torch.eye(4, 8)})


@case(targets="a first token whose only visible score is far below -1e4: mask with -inf (or the dtype's minimum), "
              "not a large negative number")
def very_negative_own_score(rng):
    return _own_score(rng, -1.5e4)  # every score within float16


@case(targets="a first token whose only visible score is -100000, below float16's range: mask with -inf (or the "
              "minimum of the scores' own dtype), not float16's minimum -65504 in every dtype",
      dtypes=("float32", "bfloat16"))  # float16 cannot hold such a score
def own_score_below_float16_range(rng):
    return _own_score(rng, -1e5)


@case(targets="the flash path: a first token whose only visible score is far below -1e4: a causal mask built by hand "
              "for the fused kernel needs -inf (or is_causal=True), not a large negative number")
def very_negative_own_score_flash(rng):
    return _own_score(rng, -1.5e4, flash=True)


@case(targets="the flash path: a first token whose only visible score is -100000, below float16's range: -inf (or "
              "is_causal=True), not float16's minimum -65504 in every dtype", dtypes=("float32", "bfloat16"))
def own_score_below_float16_range_flash(rng):
    return _own_score(rng, -1e5, flash=True)


def branched(rng, B, grad):
    """A prefix, two continuations each from the prefix's past_kv, then each branch as one full forward."""
    cos, sin = rope_tables(7, 8)
    prefix, a, b = rng.randn(B, 4, 64), rng.randn(B, 3, 64), rng.randn(B, 2, 64)
    steps = [Call(prefix, pe(cos, sin, 0, 4), use_cache=True),
             Call(a, pe(cos, sin, 4, 7), past_key_value=Prev(0, 1), use_cache=True),
             Call(b, pe(cos, sin, 4, 6), past_key_value=Prev(0, 1), use_cache=True),
             Call(torch.cat([prefix, a], dim=1), pe(cos, sin, 0, 7), use_cache=True),
             Call(torch.cat([prefix, b], dim=1), pe(cos, sin, 0, 6), use_cache=True)]
    return Case(init=dict(config=config()), steps=steps, grad=grad, checks=[
        Same(Cat([Out(0, 0), Out(1, 0)], dim=1), Out(3, 0), OWN_PAST),
        Same(Cat([Out(0, 0), Out(2, 0)], dim=1), Out(4, 0), OWN_PAST),
        Same(Out(1, 1, 0), Out(3, 1, 0), CACHE_FULL),
        Same(Out(2, 1, 0), Out(4, 1, 0), CACHE_FULL),
    ])


@case(targets="two continuations branched from one prefix past_kv: attend over the cache you are handed")
def branch_from_prefix(rng):
    return branched(rng, B=2, grad=True)


@case(targets="generation as inference runs it (torch.no_grad()): two continuations branched from one prefix "
              "past_key_value, each over the past it is handed; a cache buffer written in place only when autograd is "
              "off shows here")
def branch_from_prefix_inference(rng):
    return branched(rng, B=1, grad=False)


@case(targets="other padding with the same shapes on one layer, in one mask buffer the caller refills in place: the "
              "mask comes from this call's attention_mask (not from one kept by its id() or data_ptr())")
def padding_changes(rng):
    cfg, S = config(hidden=32, heads=4, kv=2), 5
    cos, sin = rope_tables(S, 8)
    steps = []
    for lengths in ([5, 2], [3, 4], [1, 5]):
        mask = torch.zeros(2, S, dtype=torch.long)
        for b, n in enumerate(lengths):
            mask[b, :n] = 1
        given = Refill(0, "attention_mask", mask) if steps else mask  # calls 2 and 3: call 1's tensor, new values
        steps.append(Call(rng.randn(2, S, 32), pe(cos, sin, 0, S), attention_mask=given).ungraded((mask == 0)[:, :, None], 0))
    return Case(init=dict(config=cfg), steps=steps)


@case(targets="past_key_value continued on a new layer with the same weights: only the cache carries the history")
def continue_on_new_layer(rng):
    cos, sin = rope_tables(8, 8, theta=1e6)
    x = rng.randn(2, 8, 64)
    steps = [Call(x[:, :5], pe(cos, sin, 0, 5), use_cache=True),
             Call(x[:, 5:7], pe(cos, sin, 5, 7), past_key_value=Prev(0, 1), use_cache=True).fresh(),
             Call(x[:, 7:], pe(cos, sin, 7, 8), past_key_value=Prev(1, 1), use_cache=True).fresh(),
             Call(x, pe(cos, sin, 0, 8), use_cache=True)]
    return Case(init=dict(config=config(flash=True)), steps=steps, checks=[
        Same(Cat([Out(0, 0), Out(1, 0), Out(2, 0)], dim=1), Out(3, 0), OWN_PAST),
        Same(Out(2, 1, 0), Out(3, 1, 0), CACHE_FULL),
    ])


@case(targets="an inference loop under torch.no_grad() that builds each input afresh and frees it after the call: a new tensor "
              "may get a freed one's id() (and ._version 0 again), so nothing may be kept by id()")
def inputs_freed_between_calls(rng):
    cos, sin = rope_tables(5, 8)
    steps = [Call(rng.randn(2, 5, 64), pe(cos, sin, 0, 5)).temporary_inputs() for _ in range(4)]
    return Case(init=dict(config=config()), steps=steps, grad=False)  # inference


@case(targets="the caller changes the weights in place between two calls (an optimizer step, load_state_dict): the "
              "second call uses the new ones, nothing computed from the old weights may be kept on self")
def weights_updated_between_calls(rng):
    cos, sin = rope_tables(5, 8)
    x = rng.randn(2, 5, 64)
    new = {name: rng.randn(rows, 64, scale=64 ** -0.5)
           for name, rows in (("q_proj.weight", 64), ("k_proj.weight", 16), ("v_proj.weight", 16), ("o_proj.weight", 64))}
    return Case(init=dict(config=config()), steps=[Call(x, pe(cos, sin, 0, 5)), Call(x, pe(cos, sin, 0, 5)).updated(new)],
                grad=False)  # a training step runs backward before it changes the weights: a forward property


@case(targets="one hidden-states buffer the caller refills in place between calls (a static batch buffer): the "
              "output comes from this call's values, never from a result kept by the tensor object")
def hidden_states_refilled(rng):
    cos, sin = rope_tables(5, 8)
    steps = [Call(rng.randn(2, 5, 64), pe(cos, sin, 0, 5))]
    steps += [Call(Refill(0, 0, rng.randn(2, 5, 64)), pe(cos, sin, 0, 5)) for _ in range(2)]
    return Case(init=dict(config=config()), steps=steps, grad=False)  # written in place: a forward property


@case(targets="an input that needs no gradient (the first layer of a model, fed embeddings with "
              "requires_grad=False): the weights' gradients are still graded, so autograd may not be switched off "
              "because the input needs none")
def input_needs_no_grad(rng):
    cos, sin = rope_tables(5, 8)
    return Case(init=dict(config=config()), steps=[Call(Const(rng.randn(2, 5, 64)), pe(cos, sin, 0, 5))])


@case(targets="two sequences decoded in turns on one layer (two requests batched by a server): each continues from "
              "the past_key_value it is handed, never from a cache kept on self and found by its length")
def interleaved_sequences(rng):
    cos, sin = rope_tables(7, 8)
    x, y = rng.randn(2, 7, 64), rng.randn(2, 6, 64)
    steps = [Call(x[:, :4], pe(cos, sin, 0, 4), use_cache=True),
             Call(y[:, :4], pe(cos, sin, 0, 4), use_cache=True),  # the same length: only the values tell them apart
             Call(x[:, 4:6], pe(cos, sin, 4, 6), past_key_value=Prev(0, 1), use_cache=True),
             Call(y[:, 4:], pe(cos, sin, 4, 6), past_key_value=Prev(1, 1), use_cache=True),
             Call(x[:, 6:], pe(cos, sin, 6, 7), past_key_value=Prev(2, 1), use_cache=True),
             Call(x, pe(cos, sin, 0, 7), use_cache=True), Call(y, pe(cos, sin, 0, 6), use_cache=True)]
    return Case(init=dict(config=config()), steps=steps, checks=[
        Same(Cat([Out(0, 0), Out(2, 0), Out(4, 0)], dim=1), Out(5, 0), OWN_PAST),
        Same(Cat([Out(1, 0), Out(3, 0)], dim=1), Out(6, 0), OWN_PAST),
    ])


def _cut(step, n):
    """past_key_value as speculative decoding hands it back: the first n positions of the returned one (a view)."""
    return (Prev(step, 1, 0).narrow(1, 0, n), Prev(step, 1, 1).narrow(1, 0, n))


def _reordered(step, order):
    """past_key_value as beam search hands it back: its batch reordered (index_select, a new tensor)."""
    return (Prev(step, 1, 0).index_select(0, order), Prev(step, 1, 1).index_select(0, order))


@case(targets="the caller cuts rejected draft tokens off the returned past_key_value (speculative decoding: a view of "
              "it, the same storage), then reorders its batch (beam search): attend over exactly the past you are "
              "handed, never over one kept by its data_ptr()")
def cache_cut_and_reordered(rng, flash=False, grad=True):
    cos, sin = rope_tables(8, 8)
    x, d = rng.randn(2, 7, 64), rng.randn(2, 2, 64)  # 4 accepted tokens then 3 drafts; then 2 new tokens
    steps = [Call(x, pe(cos, sin, 0, 7), use_cache=True),
             Call(d[:, :1], pe(cos, sin, 4, 5), past_key_value=_cut(0, 4), use_cache=True),
             Call(d[:, 1:], pe(cos, sin, 5, 6), past_key_value=_reordered(1, [1, 0]), use_cache=True)]
    return Case(init=dict(config=config(flash=flash)), steps=steps, grad=grad)


@case(targets="the same cut and reorder under torch.no_grad(), as generation runs: a cache written in place only when "
              "autograd is off is graded here")
def cache_cut_and_reordered_inference(rng):
    return cache_cut_and_reordered(rng, flash=True, grad=False)


def _eval_after_training(rng, flash):
    cos, sin = rope_tables(6, 8)
    x = rng.randn(2, 6, 64)
    everything = torch.ones(1, 1, 1, dtype=torch.bool)  # a training step's output is random: not graded
    steps = [Call(x[:, :4], pe(cos, sin, 0, 4), use_cache=True).ungraded(everything, 0),
             Call(x[:, :4], pe(cos, sin, 0, 4), use_cache=True).in_mode(False),
             Call(x[:, 4:], pe(cos, sin, 4, 6), past_key_value=Prev(1, 1), use_cache=True),
             Call(x[:, :2], pe(cos, sin, 0, 2), use_cache=True).in_mode(True).ungraded(everything, 0),
             Call(x, pe(cos, sin, 0, 6), use_cache=True).in_mode(False)]
    return Case(init=dict(config=config(flash=flash, dropout=0.5)), steps=steps, train=True, grad=False,
                checks=[Same(Out(1, 0), Out(4, 0)[:, :4], EVAL_AFTER_TRAINING)])


@case(targets="training steps, then evaluation on the same layer (model.train(), then model.eval()): the mode is "
              "self.training at each call, not the one of the first call")
def eval_after_training(rng):
    return _eval_after_training(rng, flash=False)


@case(targets="training, then evaluation on the same layer, fast path: dropout_p=self.dropout if self.training at "
              "each call")
def eval_after_training_flash(rng):
    return _eval_after_training(rng, flash=True)


@case(targets="a mask buffer all ones on one decoding step, refilled in place with padding for the next: whether "
              "attention_mask hides anything is read from this call's values, never remembered by the tensor object")
def all_ones_mask_refilled(rng):
    cos, sin = rope_tables(5, 8)
    prompt, a, b = rng.randn(2, 4, 64), rng.randn(2, 1, 64), rng.randn(2, 1, 64)
    padded = torch.ones(2, 5, dtype=torch.long)
    padded[0, 2:4] = 0  # element 0's prompt ends at 2: keys 2 and 3 are padding, the new token (4) is real
    steps = [Call(prompt, pe(cos, sin, 0, 4), use_cache=True),
             Call(a, pe(cos, sin, 4, 5), past_key_value=Prev(0, 1), use_cache=True,
                  attention_mask=torch.ones(2, 5, dtype=torch.long)),
             Call(b, pe(cos, sin, 4, 5), past_key_value=Prev(0, 1), use_cache=True,
                  attention_mask=Refill(1, "attention_mask", padded))]
    return Case(init=dict(config=config()), steps=steps)


def _padding_under_very_negative_scores(rng, flash):
    """hidden 8, 2 heads of width 4, one KV head, k_proj = -q_proj: every real token is a multiple c_t of one vector u
    (c = 1, 16/15, ..., 19/15, then 1.1 for the new token), so query head 0 scores -15000 c_t c_j on real key j: -16500
    and below for the new token, key 0 far above the others (one key takes the weight: a correct softmax's sum is exact
    however it is written), and 0 on element 0's padded keys (zero embeddings). Padding masked with -inf leaves the
    real keys; masked with -1e4 it scores -10000, above every real key, and the new token reads the padding."""
    a = (2 * 1.5e4) ** 0.5
    u = rng.randn(1, 1, 2, 4)
    u = (u / u.norm(dim=-1, keepdim=True)).reshape(1, 1, 8)  # head slices of norm 1
    c = torch.tensor([15.0, 16.0, 17.0, 18.0, 19.0, 16.5]) / 15
    x = (u * c[None, :, None]).expand(2, 6, 8).clone()
    x[0, 3:5] = 0  # element 0: 3 real tokens, 2 padded, then the new token
    tables = torch.ones(6, 4), torch.zeros(6, 4)  # angles 0: no rotation, so scores are as above
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[0, 3:5] = 0
    padded_rows = (mask[:, :5] == 0)[:, :, None]
    steps = [Call(x[:, :5], pe(*tables, 0, 5), use_cache=True, attention_mask=mask[:, :5]).ungraded(padded_rows, 0),
             Call(x[:, 5:], pe(*tables, 5, 6), past_key_value=Prev(0, 1), use_cache=True, attention_mask=mask)]
    return Case(init=dict(config=config(hidden=8, heads=2, kv=1, flash=flash)), steps=steps, grad=False,  # forward only
                weights={"q_proj.weight": a * torch.eye(8), "k_proj.weight": -a * torch.eye(4, 8)})


@case(targets="a padded prompt, then a new token whose real keys all score far below -1e4: padded keys need -inf "
              "(or the dtype's minimum), not (1 - attention_mask) * -10000")
def padding_under_very_negative_scores(rng):
    return _padding_under_very_negative_scores(rng, flash=False)


@case(targets="the flash path: a padded prompt, then a new token whose real keys all score far below -1e4: the "
              "padding mask handed to the fused kernel needs -inf (or a bool mask)")
def padding_under_very_negative_scores_flash(rng):
    return _padding_under_very_negative_scores(rng, flash=True)


TRAINING_STEP = ("in training mode with dropout 0.5, the mean of many draws of a new token after a padded prompt is not "
                 "what eval mode gives: the training path must attend over the past_key_value it is handed, with the "
                 "causal offset and the padding of attention_mask, exactly as eval does, dropout aside")


def _training_step_with_dropout(rng, flash):
    """2048 copies of one prompt, then a new token on its past_key_value that is told the prompt's last token is
    padding, in training mode with dropout 0.5, backward run (a training step: its gradients are random, so compared
    summed over the copies, which share one output gradient). With q_proj = 0 every query weighs
    its visible keys equally and with v_proj = o_proj = I the new token's eval output is the mean of x over the real
    keys and itself; the copies' mean must be that (relative error ~0.04 for a correct kernel, at most 0.06 over 25
    seeds in each dtype and path; attending to the padded key gives ~0.45, a causal mask without the cache offset
    more than 1)."""
    N, S, H = 2048, 4, 32
    cos, sin = rope_tables(S + 1, H // 4)
    seq, new = rng.randn(1, S, H), rng.randn(1, 1, H)
    mask = torch.tensor([[1, 1, 1, 0, 1]])  # the prompt's last token is padding (said when decoding: no padded query
    # whose output a correct layer may leave as it likes gets an output gradient); the new token is real
    want = (seq[0, :3].double().sum(0) + new[0, 0].double()) / 4
    eye = torch.eye(H)

    def eval_like(out):  # 1.0 if the copies' mean is within 0.2 of eval mode's output, else 0.0
        err = (out.double().mean(0)[0] - want).norm() / want.norm()
        return (err < 0.2).to(out.dtype)

    everything = torch.ones(1, 1, 1, dtype=torch.bool)  # random values: judged by their mean alone
    one = Fn(lambda a: torch.ones((), dtype=a.dtype), Out(1, 0))
    steps = [Call(seq.expand(N, S, H).clone(), pe(cos, sin, 0, S), use_cache=True).ungraded(everything, 0),
             Call(new.expand(N, 1, H).clone(), pe(cos, sin, S, S + 1), past_key_value=Prev(0, 1), use_cache=True,
                  attention_mask=mask.expand(N, S + 1).clone()).ungraded(everything, 0)]
    return Case(init=dict(config=config(hidden=H, heads=4, kv=4, flash=flash, dropout=0.5)), train=True,
                compare_grads=False, steps=steps, checks=[Same(Fn(eval_like, Out(1, 0)), one, TRAINING_STEP)],
                weights={"q_proj.weight": torch.zeros(H, H), "v_proj.weight": eye, "o_proj.weight": eye},
                time_factor=3)  # a correct layer that unpads each sequence in a Python loop (as flash-attn's varlen
    # callers do) runs 2048 of them twice, and backward: 3 s alone, 8-15 s under the guards on a loaded machine


@case(targets="a training step with dropout 0.5 on a padded prompt and its past_key_value: the mean of many draws is "
              "what eval mode gives, and backward runs (dropout applied in place over the softmax's output breaks it)")
def training_step_with_dropout(rng):
    return _training_step_with_dropout(rng, flash=False)


@case(targets="the same training step on the flash path: dropout_p=config.dropout with the padding and the cache "
              "offset, never a causal shortcut that drops them in training")
def training_step_with_dropout_flash(rng):
    return _training_step_with_dropout(rng, flash=True)


@case(targets="a plain training forward (no cache, no mask, dropout 0) on hidden states that need no gradient: outputs "
              "and the weights' gradients are graded exactly (torch.utils.checkpoint's use_reentrant=True builds no "
              "graph then: use_reentrant=False)")
def training_on_frozen_hidden_states(rng):
    cos, sin = rope_tables(6, 8)
    return Case(init=dict(config=config()), train=True, steps=[Call(Const(rng.randn(2, 6, 64)), pe(cos, sin, 0, 6))])
