"""Low precision: an error that leans one way fails even when each element is within the tolerance
(torchcode.grader.compare), while honest rounding, which leans neither way, passes."""

from __future__ import annotations

import pytest
import torch

from torchcode.grader import compare


def judge(got, gold, ref, low):
    return compare.compare("output", got.to(low), gold, ref.to(low), factor=10.0, floor=1e-5)


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_a_scale_or_an_offset_is_caught_and_rounding_is_not(low):
    gen = torch.Generator().manual_seed(0)
    gold = torch.randn(4, 16, 8, generator=gen, dtype=torch.float64)
    ref = gold.to(low)  # the reference in low precision: gold rounded
    noise = gold * (1 + torch.finfo(low).eps * torch.randn(gold.shape, generator=gen, dtype=torch.float64))
    assert judge(noise, gold, ref, low) is None  # another honest rounding
    eps = torch.finfo(low).eps
    for wrong in (gold * (1 + 4 * eps), gold + 4 * eps * gold.abs().max()):
        m = judge(wrong, gold, ref, low)
        assert m is not None and m.bias is not None and m.bad == 0, m  # no element alone is off
        assert abs(m.bias) > 2 * eps
    eps32 = torch.finfo(torch.float32).eps
    assert judge(gold * (1 + 4 * eps32), gold, gold, torch.float32) is None  # float32: not this rule


def test_nothing_is_said_where_the_reference_itself_is_far_off():
    """Ill-conditioned cases (large scores): honest kernels lean by more than an epsilon there."""
    gen = torch.Generator().manual_seed(1)
    gold = torch.randn(64, 8, generator=gen, dtype=torch.float64)
    ref = gold + 0.1 * torch.randn(gold.shape, generator=gen, dtype=torch.float64)
    assert judge(gold * 1.01, gold, ref, torch.bfloat16) is None


def test_tiny_tensors_are_left_alone():
    gold = torch.linspace(-1, 1, 32, dtype=torch.float64)
    assert judge(gold * 1.02, gold, gold, torch.bfloat16) is None
