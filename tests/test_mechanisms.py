"""The grader's generic mechanisms against classes of wrong code the hidden cases were not written
for: fresh instances, inputs left unchanged, memory layouts, hidden state across cases.

tests/fixtures/mechanism_pack holds a small KV-cache problem whose variants exercise them; the
built-in problems' own variants (tests/test_variants.py) and the hostile corpus do the rest.
"""

from __future__ import annotations

import pytest

from conftest import FIXTURES, expected_verdict
from torchcode.catalog import load_catalog

PACK = FIXTURES / "mechanism_pack"
MECH = load_catalog([PACK], builtin=False)
VARIANTS = [(s.id, p) for s in MECH.ordered() for kind in ("wrong", "right") for p in s.variants(kind)]


@pytest.mark.parametrize("pid,path", VARIANTS, ids=[f"{p}/{f.parent.name}/{f.stem}" for p, f in VARIANTS])
def test_mechanism_variant_gets_intended_verdict(grader, pid, path):
    report = grader.grade(MECH.get(pid), path)
    assert report.verdict.value == expected_verdict(path), (report.message, report.seed)


def test_mechanism_pack_validates(cli):
    r = cli("validate", "--problems-dir", str(PACK), "--seeds", "2")
    assert r.code == 0, r.out


def test_fresh_instance_exposes_history_kept_on_self(grader):
    path = PACK / "problems" / "cached_layer" / "wrong" / "keeps_history_on_self.py"
    report = grader.grade(MECH.get("cached_layer"), path)
    bad = {c.name: c for c in report.cases if not c.passed}
    assert "fresh_instance" in bad and "prefill" not in bad, report.message
    assert "use the cache you are given, not state kept on self" in bad["fresh_instance"].message


def test_an_input_changed_in_place_is_named_by_the_contract(grader, catalog):
    """Right values, but the caller's mask inverted in place: rejected, naming the input."""
    report = grader.grade(catalog.get("sdpa"), catalog.get("sdpa").folder / "wrong" / "flips_mask_in_place.py")
    assert report.verdict.value == "wrong_answer"
    masked = [c for c in report.cases if not c.passed]
    assert masked and all("modified its input `mask` in place" in c.message for c in masked), report.message


def test_a_returned_cache_written_later_is_named(grader):
    path = PACK / "problems" / "cached_layer" / "wrong" / "static_buffer_when_no_grad.py"
    report = grader.grade(MECH.get("cached_layer"), path)
    bad = {c.name: c.message for c in report.cases if not c.passed}
    assert list(bad) == ["branches"], bad
    assert "`output[1][0]`, which your call 2 returned, was changed in place during call 3" in bad["branches"]
