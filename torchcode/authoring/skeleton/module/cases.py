"""Hidden cases for ${id}. Case(init=...) builds the module; the grader loads the same
random weights into the learner's module and the reference by parameter name."""

from torchcode.grader.cases import Call, Case, case


@case(targets="batch 2, 7 tokens")
def basic(rng):
    return Case(init=dict(d_model=16), steps=[Call(rng.randn(2, 7, 16))])


@case(targets="a single token")
def single_token(rng):
    return Case(init=dict(d_model=8), steps=[Call(rng.randn(1, 1, 8))])
