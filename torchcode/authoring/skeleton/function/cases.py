"""Hidden cases for ${id}. Each @case function gets a seeded rng and returns a Case.

See docs/authoring.md: Call(*args) is one call of the learner's function; Case(steps=[...])
may add property checks (Same), a memory bound (max_intermediate) or grad=False.
"""

from torchcode.grader.cases import Call, Case, case


@case(targets="the basic shape: batch 2, 7 tokens, width 16")
def basic(rng):
    return Case(steps=[Call(rng.randn(2, 7, 16), rng.randn(2, 7, 16), rng.randn(2, 7, 16))])


@case(targets="a single token")
def single_token(rng):
    return Case(steps=[Call(rng.randn(1, 1, 8), rng.randn(1, 1, 8), rng.randn(1, 1, 8))])
