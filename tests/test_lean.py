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


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_a_lean_that_changes_sign_from_slice_to_slice_is_caught(low):
    """+4 epsilons on even heads (rows, features) and -4 on odd ones: the whole tensor leans neither way, every
    slice does; honest rounding noise, slice by slice, does not."""
    gen = torch.Generator().manual_seed(2)
    gold = torch.randn(4, 16, 32, generator=gen, dtype=torch.float64)
    eps = torch.finfo(low).eps
    for dim in range(3):
        shape = [1, 1, 1]
        shape[dim] = gold.shape[dim]
        sign = (1 - 2 * (torch.arange(gold.shape[dim]) % 2)).double().reshape(shape)
        for wrong in (gold * (1 + 4 * eps * sign), gold + 4 * eps * sign * gold.abs().max()):
            m = judge(wrong, gold, gold, low)
            assert m is not None and m.bias_dim == dim and m.bad == 0, (dim, m)
    noise = gold * (1 + eps * torch.randn(gold.shape, generator=gen, dtype=torch.float64))
    assert judge(noise, gold, gold, low) is None


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_a_part_must_lean_more_than_the_whole(low):
    """2.5 epsilons one way on every row fails (the whole tensor leans); +2.5 on even rows and -2.5 on odd ones does
    not: an honest kernel that rounds a factor per row (a log-sum-exp merge in low precision) leans that much row by
    row. 4 epsilons row by row still fails (test_a_lean_that_changes_sign_from_slice_to_slice_is_caught)."""
    gen = torch.Generator().manual_seed(3)
    gold = torch.randn(4, 16, 32, generator=gen, dtype=torch.float64)
    eps = torch.finfo(low).eps
    sign = (1 - 2 * (torch.arange(16) % 2)).double().reshape(1, 16, 1)
    m = judge(gold * (1 + 2.5 * eps), gold, gold, low)
    assert m is not None and m.bias is not None and m.bias_dim is None, m
    assert judge(gold * (1 + 2.5 * eps * sign), gold, gold, low) is None
