"""Hidden cases for cross_attention."""

from torchcode.grader.cases import Call, Case, Fn, Out, Same, case

OTHER_MEMORY = ("a second call with the same queries and another memory x_kv gave the same output as the first: "
                "project keys and values from this call's x_kv; keep no keys/values of an earlier memory on self")
SAME_INPUTS = ("the same x_q and x_kv twice on one layer gave different outputs: keep nothing random at evaluation "
               "and nothing from the call in between")


def differs(a, b):
    """1.0 if two outputs are not identical, else 0.0."""
    return ((a - b).abs().amax() > 0).to(a.dtype)


def cross(rng, d_model, num_heads, B, Sq, Skv, scale=1.0):
    return Case(init=dict(d_model=d_model, num_heads=num_heads),
                steps=[Call(rng.randn(B, Sq, d_model, scale=scale), rng.randn(B, Skv, d_model, scale=scale))])


@case(targets="short decoder, longer encoder: keys and values come from x_kv")
def decoder_reads_encoder(rng):
    return cross(rng, 32, 4, B=2, Sq=3, Skv=10)


@case(targets="queries longer than the memory")
def more_queries(rng):
    return cross(rng, 32, 4, B=2, Sq=9, Skv=4)


@case(targets="8 narrow heads: scale by sqrt(d_k)")
def many_heads(rng):
    return cross(rng, 48, 8, B=1, Sq=5, Skv=7)


@case(targets="equal lengths (a self-attention-shaped call)")
def equal_lengths(rng):
    return cross(rng, 24, 3, B=3, Sq=6, Skv=6)


@case(targets="one query token, one memory token")
def single_tokens(rng):
    return cross(rng, 16, 2, B=2, Sq=1, Skv=1)


@case(targets="large activations: a stable softmax")
def large_inputs(rng):
    return cross(rng, 32, 2, B=2, Sq=4, Skv=6, scale=12.0)


@case(targets="batch elements are independent: each query reads only its own sentence's memory")
def batch_elements_independent(rng):
    x, mem = rng.randn(2, 3, 32), rng.randn(2, 5, 32)
    mem2 = mem.clone()
    mem2[1] = rng.randn(5, 32)  # only batch element 1's memory changes
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, mem), Call(x, mem2)], checks=[Same(
        Out(1)[0], Out(0)[0], "changing the memory of batch element 1 changed the output of batch element 0: "
        "attend within each batch element (keep the batch dim apart from the token dim when you reshape)")])


@case(targets="one layer, two memories of the same shape (two source sentences): keys/values from this call's x_kv")
def memories_share_shapes(rng):
    x, mem1, mem2 = rng.randn(2, 4, 32), rng.randn(2, 6, 32), rng.randn(2, 6, 32)
    one = Fn(lambda a: a.new_ones(()), Out(0))
    return Case(init=dict(d_model=32, num_heads=4), steps=[Call(x, mem1), Call(x, mem2), Call(x, mem1)],
                checks=[Same(Out(2), Out(0), SAME_INPUTS), Same(Fn(differs, Out(1), Out(0)), one, OTHER_MEMORY)])
