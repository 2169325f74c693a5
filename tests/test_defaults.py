"""Keyword defaults are part of the contract (torchcode.grader.defaults): `eps=1e-5` for `eps=1e-6` is a
wrong interface, said before any case runs; equal values written differently, None and expressions pass."""

from __future__ import annotations

import pytest

from conftest import ROOT

LINEAR = "def linear_attention(Q, K, V{rest}):\n    return V\n"


@pytest.fixture(scope="module")
def problems():
    from torchcode.catalog import load_catalog
    from torchcode.grader.problem import Problem

    cat = load_catalog()
    return {pid: Problem(cat.get(pid)) for pid in ("linear_attention", "rope", "flash_attention", "minimind_attention")}


def said(problems, pid: str, source: str):
    from torchcode.grader import defaults

    p = problems[pid]
    return defaults.problem(source, p.spec.entry, p.reference)


@pytest.mark.parametrize("rest", [", eps=1e-6", ", eps=0.000001", ", eps: float = 1e-06", ", eps=None",
                                  ", eps=1 / 10**6", ", eps=EPS", ", *, eps=1e-6", ", eps=1e-6, **kw", ""])
def test_the_contracts_default_written_any_way_passes(problems, rest):
    assert said(problems, "linear_attention", LINEAR.format(rest=rest)) is None


@pytest.mark.parametrize("rest,shown", [(", eps=1e-5", "1e-05"), (", eps=0", "0"), (", *, eps=1e-8", "1e-08"),
                                        (", eps=True", "True")])
def test_another_literal_default_is_named_with_the_fix(problems, rest, shown):
    msg = said(problems, "linear_attention", LINEAR.format(rest=rest))
    assert msg and f"the default {shown}" in msg and "Use `eps=1e-06`" in msg, msg


def test_other_problems_and_module_methods(problems):
    assert said(problems, "rope", "def apply_rope(q, k, base=10000):\n    return q, k\n") is None  # int == float
    assert "base=10000.0" in said(problems, "rope", "def apply_rope(q, k, base=500000.0):\n    return q, k\n")
    assert "block_size=32" in said(problems, "flash_attention", "def flash_attention(Q, K, V, block_size=64):\n  pass\n")
    layer = ("import torch\nclass Attention(torch.nn.Module):\n    def __init__(self, config):\n        super().__init__()\n"
             "    def forward(self, x, position_embeddings, past_key_value=None, use_cache={uc}, attention_mask=None):\n"
             "        pass\n")
    assert said(problems, "minimind_attention", layer.format(uc="False")) is None
    msg = said(problems, "minimind_attention", layer.format(uc="True"))
    assert msg and "`Attention.forward` gives `use_cache` the default True" in msg, msg
    # the last definition is the one Python keeps; one that is not a plain def is not read
    twice = LINEAR.format(rest=", eps=1e-5") + LINEAR.format(rest=", eps=1e-6")
    assert said(problems, "linear_attention", twice) is None
    assert said(problems, "linear_attention", "linear_attention = lambda Q, K, V, eps=1e-5: V\n") is None
    # bytes as Python reads them: a BOM, a coding line
    assert "eps=1e-06" in said(problems, "linear_attention", b"\xef\xbb\xbf" + LINEAR.format(rest=", eps=1e-5").encode())
    latin = "# -*- coding: latin-1 -*-\n# \xe9\n" + LINEAR.format(rest=", eps=1e-5")
    assert "eps=1e-06" in said(problems, "linear_attention", latin.encode("latin-1"))


def test_check_says_it_before_running_a_case(cli, workdir):
    src = (ROOT / "problems" / "linear_attention" / "wrong" / "eps_default_from_layernorm.py").read_text()
    (workdir / "linear_attention.py").write_text(src)
    r = cli("check", "linear_attention.py", "--device", "cpu")
    assert r.code == 1, r.text
    assert "Wrong interface" in r.out and "Use `eps=1e-06`" in r.out, r.out


def test_what_is_called_is_read_not_what_it_says(problems):
    """The worker's half (defaults.effective, on the objects themselves) and the trusted half (reported_problem):
    partials, functools.wraps wrappers, an assigned __signature__ and a lookalike float say nothing but the truth."""
    import functools
    import inspect

    from torchcode.grader import defaults

    p = problems["linear_attention"]

    def judged(fn):
        return defaults.reported_problem({"linear_attention": defaults.effective(fn, ("Q", "K", "V", "eps"))},
                                         p.spec.entry, p.reference)

    def right(Q, K, V, eps=1e-6):
        return V

    def wrong(Q, K, V, eps=1e-5):
        return V

    @functools.wraps(right)
    def wrapper(Q, K, V, eps=1e-5):
        return right(Q, K, V, eps=eps)

    @functools.wraps(right)
    def passes_on(*args, **kwargs):
        return right(*args, **kwargs)

    class Lookalike(float):
        def __repr__(self):
            return "1e-06"

    lying = functools.partial(wrong)
    wrong.__signature__ = inspect.signature(right)
    assert judged(right) is None and judged(passes_on) is None and judged(functools.partial(wrong, eps=1e-6)) is None
    for fn in (wrong, wrapper, lying, functools.partial(right, eps=1e-5), lambda Q, K, V, eps=Lookalike(1e-5): V):
        msg = judged(fn)
        assert msg and "the default 1e-05 when it is called" in msg, (fn, msg)
    assert "an object of type 'object'" in judged(lambda Q, K, V, eps=object(): V)
    for forged in (None, [], {"linear_attention": {"eps": ["float", "nan", "x"]}}, {"linear_attention": {"eps": 1e-5}},
                   {"linear_attention": {"eps": ["int", "9" * 5000]}}, {"linear_attention": {"eps": ["bool", "yes"]}}):
        assert defaults.reported_problem(forged, p.spec.entry, p.reference) is None  # malformed: nothing said


def test_reading_defaults_runs_none_of_the_learners_code_and_a_huge_int_hides_nothing(problems):
    """effective() runs after each case, outside its guard: a key of the learner's type whose hash collides with
    `eps`, `__wrapped__` or `forward` (kwdefaults, a function's __dict__, a partial's keywords, and a class body,
    read by static_attribute) has its __eq__ run there; and an int default past 4300 digits made the read raise,
    so no default was judged."""
    import functools

    from torchcode.grader import defaults

    p = problems["linear_attention"]
    ran = []

    class Colliding:
        def __init__(self, name):
            self.name = name

        def __hash__(self):
            return hash(self.name)

        def __eq__(self, other):
            ran.append(self.name)
            return False

    def fn(Q, K, V, *, eps=1e-6):
        return V

    def plain(Q, K, V, eps=1e-6):
        return V

    fn.__kwdefaults__ = {"eps": 1e-6, Colliding("eps"): 1}
    plain.__dict__ = {Colliding("__wrapped__"): 1}
    part = functools.partial(plain)
    part.__setstate__((plain, (), {"eps": 1e-6, Colliding("eps"): 2}, None))
    cls = type("Net", (), {Colliding("forward"): 1, "forward": plain})
    ran.clear()
    assert [defaults.effective(f, ("eps",)) for f in (fn, plain, part)] == [{"eps": ["float", "1e-06"]}] * 3
    assert defaults.static_attribute(cls, "forward") is plain
    assert ran == []
    plain.__defaults__ = (10 ** 5000,)
    msg = defaults.reported_problem({"linear_attention": defaults.effective(plain, ("Q", "K", "V", "eps"))},
                                    p.spec.entry, p.reference)
    assert msg and "the default inf when it is called" in msg, msg


def test_what_cannot_be_read_is_said_never_passed(problems):
    """A default behind an object that is not a function (a callable instance, a subclass of partial), one whose
    class's metaclass defines __eq__ (it ran, raised, and hid every default), a __defaults__ longer than the
    parameters (Python right-aligns it), or a read that failed: each is a non-pass that says what to do."""
    import functools

    from torchcode.grader import defaults

    p = problems["linear_attention"]
    names = ("Q", "K", "V", "eps")

    def judged(fn):
        return defaults.reported_problem({"linear_attention": defaults.effective(fn, names)}, p.spec.entry, p.reference)

    def right(Q, K, V, eps=1e-6):
        return V

    class Call:
        def __call__(self, Q, K, V, eps=1e-5):
            return V

    class Bound(functools.partial):
        pass

    class Meta(type):
        def __eq__(cls, other):
            raise RuntimeError("no")

        __hash__ = type.__hash__

    def poisoned(Q, K, V=Meta("Poison", (), {})(), eps=1e-5):
        return V

    def overlong(Q, K, V, eps=1e-6):
        return V

    overlong.__defaults__ = (0, 1e-6, 0, 0, 0, 1e-5)
    for fn in (Call(), Bound(right)):
        msg = judged(fn)
        assert msg and "cannot be read" in msg and "plain `def`" in msg, (fn, msg)
    for fn in (poisoned, overlong):
        msg = judged(fn)
        assert msg and "the default 1e-05 when it is called" in msg, msg
    assert judged(functools.partial(right)) is None and judged(right) is None
    msg = defaults.reported_problem({defaults.UNREADABLE: "RuntimeError"}, p.spec.entry, p.reference)
    assert msg and "cannot be read (reading them raised RuntimeError)" in msg, msg


def test_a_scripted_function_is_read_through_its_schema(problems):
    """torch.jit.script makes a ScriptFunction (not a Python function): its defaults are in its schema, read there
    (a correct scripted kernel was refused as unreadable), through torch's own getters bound at import."""
    import torch

    from torchcode.grader import defaults

    p = problems["linear_attention"]

    def right(Q, K, V, eps: float = 1e-6):
        return V

    def wrong(Q, K, V, eps: float = 1e-5):
        return V

    def judged(fn):
        return defaults.reported_problem({"linear_attention": defaults.effective(fn, ("Q", "K", "V", "eps"))},
                                         p.spec.entry, p.reference)

    assert judged(torch.jit.script(right)) is None
    msg = judged(torch.jit.script(wrong))
    assert msg and "the default 1e-05 when it is called" in msg, msg
    # a replaced ScriptFunction.__call__ calls with defaults of its own, whatever the schema says: not read
    script = torch.jit.script(right)
    call = torch._C.ScriptFunction.__dict__["__call__"]
    torch._C.ScriptFunction.__call__ = lambda self, Q, K, V, eps=1e-5: call(self, Q, K, V, eps)
    try:
        msg = judged(script)
    finally:
        torch._C.ScriptFunction.__call__ = call
    assert msg and "cannot be read" in msg, msg
    assert judged(script) is None


def test_a_module_whose_class_has_no_forward_is_told_so(grader, catalog, tmp_path):
    """A forward set only on the instance in __init__: the interface check reads the class, which has nn.Module's
    placeholder; it said 'yours is Attention.forward(self, *input: Any) -> None', which the learner never wrote."""
    src = (ROOT / "solutions" / "minimind_attention.py").read_text()
    src = src.replace("        self.flash = config.flash_attn", "        self.flash = config.flash_attn\n"
                      "        self.forward = self.attend").replace("    def forward(", "    def attend(")
    path = tmp_path / "minimind_attention.py"
    path.write_text(src)
    report = grader.grade(catalog.get("minimind_attention"), path, seed=0)
    assert report.verdict.value == "bad_interface", report.message
    assert "has no `forward` method in its class" in report.message and "*input" not in report.message, report.message
