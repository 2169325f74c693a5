"""Deciding one case: structure, NaN/inf, the variant's properties, values, gradients (trusted side).

Everything here reads tensors the worker sent back as raw bytes and expected values it never
saw; the first problem found, in that order, is the case's verdict and its message.
"""

from __future__ import annotations

import math
import re

import torch

from torchcode.catalog.spec import GradingPolicy
from torchcode.grader import compare, execute, protocol
from torchcode.grader.problem import Prepared
from torchcode.grader.protocol import Unsupported
from torchcode.grader.result import NOT_FINITE, CaseResult, Mismatch, Verdict, plain_mismatch


def judge_case(pol: GradingPolicy, p: Prepared, reply: dict, tensors: list[torch.Tensor],
               notes: protocol.Notes | None = None, dims: dict | None = None) -> CaseResult:
    """The verdict of one case, from what the worker sent back (``reply``, and ``notes`` sent before it).
    ``dims``: the names of tensors' last dimensions (cases.py's DIMS), by output or input name."""
    c = p.case
    res = CaseResult(c.name, Verdict.ACCEPTED, targets=c.targets)
    try:
        reply = clean_reply(reply)
    except protocol.ProtocolError as e:
        res.verdict, res.message = Verdict.CRASHED, malformed(e)
        return res
    res.seconds = reply["seconds"]
    if notes is not None and (notes.forbidden or notes.tamper):
        return error_result(res, {"kind": "forbidden", "names": notes.forbidden,
                                  "message": f"your code tampered with the grader's guards ({notes.tamper[0]}); "
                                             "submissions may not switch them off" if notes.tamper else ""})
    if "error" in reply:
        if isinstance(reply["error"], dict) and reply["error"].get("kind") == "mutated":
            res.verdict, res.message = Verdict.WRONG_ANSWER, _mutated_message(p, reply["error"])
            return res
        res = error_result(res, reply["error"])
        which = reply["error"].get("input")
        label = (p.leaf_labels[which] if isinstance(which, int) and which < len(p.leaf_labels)
                 else reply["error"].get("parameter"))
        if label and res.message.startswith("a gradient your code produced"):
            res.message = f"the gradient of `{label}`" + res.message.removeprefix("a gradient your code produced")
        if res.verdict is Verdict.RUNTIME_ERROR and res.message and not res.message.endswith("."):
            res.message += "."
        if res.verdict is Verdict.RUNTIME_ERROR:
            res.message += _given(p, reply["error"].get("stage", ""))
            if p.header.get("positional") is True and re.search(r"positional arguments? but \d+ (were|was) given|"
                                                                  r"got multiple values for argument", res.message):
                res.message += (" The optional parameters came by position here, in the contract's order, as callers "
                                "may pass them: accept them by position too (not after `*`, nor only through `**`).")
        return res
    largest, shape = reply["largest"], reply["largest_shape"]
    if notes is not None and notes.too_large and notes.too_large[0] > largest:
        largest, shape = notes.too_large
    if c.max_intermediate is not None and largest >= c.max_intermediate:
        shape = " x ".join(map(str, shape)) or "?"
        res.verdict = Verdict.TOO_MUCH_MEMORY
        res.message = (f"your code created a tensor of shape ({shape}), {largest:,} elements; this case allows fewer than "
                       f"{c.max_intermediate:,}" + (f" ({c.intermediate_hint})" if c.intermediate_hint else "")
                       + ". Compute the result without materialising a tensor that large: one that grows with S x S, "
                       "or a broadcast product summed afterwards (a (block, block, D) tile of products, a (S, D, D) "
                       "stack of outer products), which `@` or torch.einsum computes without holding it.")
        return res
    algorithm = _algorithm_problem(c, reply)
    if algorithm:
        res.verdict, res.message = Verdict.WRONG_ALGORITHM, algorithm
        return res
    try:
        outputs = [_learner_value(v, tensors) for v in reply["outputs"]]
        in_grads = {int(k): _learner_value(v, tensors) for k, v in reply["input_grads"].items()}
        p_grads = {str(k): _learner_value(v, tensors) for k, v in reply["param_grads"].items()}
    except (ValueError, protocol.ProtocolError) as e:
        res.verdict, res.message = Verdict.CRASHED, malformed(e)
        return res
    if len(outputs) != len(c.steps):
        res.verdict, res.message = Verdict.CRASHED, "the worker sent back the wrong number of results"
        return res
    multi = len(c.steps) > 1
    flat_learner = [execute.flatten(o) for o in outputs]
    flat_gold = [execute.flatten(o) for o in p.gold.outputs]
    flat_ref = [execute.flatten(o) for o in p.ref.outputs]
    flat_spread = [execute.flatten(o) for o in p.spread.outputs] if p.spread else [{} for _ in flat_ref]

    # 1. structure, type, shape, dtype, device
    for i, (lo, go, ro) in enumerate(zip(outputs, p.gold.outputs, p.ref.outputs)):
        problem = _structure_problem(lo, go, ro, device=p.header["device"])
        if problem:
            res.verdict = Verdict.WRONG_DEVICE if " on device " in problem else Verdict.WRONG_OUTPUT
            res.message = (f"in call {i + 1}: " if multi else "") + problem
            if " has shape " in problem:
                res.message += "." + _given(p, f"in call {i + 1}")
            return res

    # 2. NaN / Inf
    for i, (lo, go) in enumerate(zip(flat_learner, flat_gold)):
        for path, g in go.items():
            t = lo[path]
            if isinstance(g, torch.Tensor) and g.is_floating_point():
                bad = ~torch.isfinite(t.tensor) & torch.isfinite(g)
                graded = torch.isfinite(g)
                if (i, path) in p.ignore:
                    graded = graded & ~p.ignore[(i, path)].to(torch.bool).expand_as(bad)
                    bad &= graded
                if bad.any():
                    idx = [int(x) for x in torch.nonzero(bad)[0]]
                    where = compare.where(bad, _dims(dims, _label(path, i, multi)), graded)
                    res.verdict = Verdict.WRONG_ANSWER
                    res.message = (f"{_label(path, i, multi)} contains {t.tensor[tuple(idx)].item()} at {idx} {NOT_FINITE} "
                                   f"({int(bad.sum()):,} of {bad.numel():,} elements"
                                   + (f"; {where}" if where else "") + "). " + _NOT_FINITE_CAUSES)
                    return res

    # 3. the properties the variant is about, on the learner's own outputs
    learner_t = [{k: v.tensor for k, v in fl.items() if isinstance(v, _LT)} for fl in flat_learner]
    for chk in c.checks:
        a, b = chk.a.resolve(learner_t), chk.b.resolve(learner_t)
        ra, rb = chk.a.resolve(flat_ref), chk.b.resolve(flat_ref)
        gb = chk.b.resolve(flat_gold)
        # both sides are the learner's outputs, each rounded to the grading dtype: a correct kernel on another
        # op path (a fused kernel for one, the math path for the other) may differ by an ulp on each side
        rounding = 2 * torch.finfo(ra.dtype).eps * gb.detach().abs().max().item() if ra.is_floating_point() else 0.0
        allowed = (pol.factor * compare.property_error(ra, rb) + pol.floor * gb.detach().abs().max().item()
                   + compare.atol_for(ra.dtype) + rounding)
        err = compare.property_error(a, b)
        if a.shape != b.shape or not err <= allowed:
            res.verdict = Verdict.WRONG_ANSWER
            # (a single number is a yes/no check of the case's own, e.g. "two draws differ": no amounts to show)
            shown = a.shape == b.shape and a.dim() > 0
            res.message = chk.because + (f" (outputs differ by {err:.3g}; allowed {allowed:.2g})" if shown else "")
            return res

    # 4. values
    for i, (lo, go, ro, so) in enumerate(zip(flat_learner, flat_gold, flat_ref, flat_spread)):
        for path, g in go.items():
            if not (isinstance(g, torch.Tensor) and g.is_floating_point()):
                continue
            m = compare.compare(_label(path, i, multi), lo[path].tensor, g, ro[path],
                                factor=pol.factor, floor=pol.floor, ignore=p.ignore.get((i, path)), spread=so.get(path),
                                dims=_dims(dims, _label(path, i, multi)))
            if m:
                return _wrong(res, m)

    # 5. gradients
    if c.grad and not c.compare_grads:  # random (dropout): each must be there, and the weights' on average
        said = _grads_in_expectation(p, in_grads, p_grads)
        return _bad_grad(res, said) if said else res
    if c.grad:
        # the largest gradient of the case: a gradient that vanishes in exact arithmetic (a key bias's: softmax
        # ignores a shift of a row's scores) is judged on that scale, the size of the terms that cancel in it
        grads = [g for g in (*p.gold.input_grads.values(), *p.gold.param_grads.values()) if g is not None and g.numel()]
        largest = max((_peak(g) for g in grads), default=0.0)
        for idx, g in p.gold.input_grads.items():
            m = _grad(pol, f"gradient of {p.leaf_labels[idx]}", in_grads.get(idx), g, p.ref.input_grads.get(idx),
                      p.spread.input_grads.get(idx) if p.spread else None, _dims(dims, p.leaf_labels[idx]), largest)
            if m:
                dtype = _dtype(p.ref.input_grads.get(idx))
                return _wrong_grad(res, m, dtype) if isinstance(m, Mismatch) else _bad_grad(res, m)
        for name, g in p.gold.param_grads.items():
            m = _grad(pol, f"gradient of {name}", p_grads.get(name), g, p.ref.param_grads.get(name),
                      p.spread.param_grads.get(name) if p.spread else None, _dims(dims, name), largest)
            if m:
                dtype = _dtype(p.ref.param_grads.get(name))
                return _wrong_grad(res, m, dtype) if isinstance(m, Mismatch) else _bad_grad(res, m)
    return res


def _mutated_message(p: Prepared, err: dict) -> str:
    """Which input the learner's code changed in place, in the contract's names, and what to do instead."""
    steps, multi = p.case.steps, len(p.case.steps) > 1
    try:
        given, during = int(err["given"]), int(err["during"])
        where, path = err["where"], [int(i) for i in err.get("path") or []]
        prev = err.get("prev")
        prev = int(prev) if prev is not None else None
    except (KeyError, TypeError, ValueError):
        return "your code modified one of its inputs in place: leave the tensors you are given unchanged"
    if where == execute.RETURNED:
        label = "output" + "".join(f"[{i}]" for i in path)
        when = "while computing gradients (in backward)" if during >= len(steps) else f"during call {during + 1}"
        return (f"`{label}`, which your call {given + 1} returned, was changed in place {when}. A caller keeps what "
                "you return (e.g. a cache it continues from twice): never write into it later; build new tensors.")
    if isinstance(where, int):
        name = p.params[where] if 0 <= where < len(p.params) else f"argument {where + 1}"
    else:
        name = str(where)
    name += "".join(f"[{i}]" for i in path)
    if during >= len(steps):
        when = "while computing gradients (in backward)"
    elif not multi:
        when = "during the call"
    elif during == given:
        when = f"during call {given + 1}"
    else:
        when = f"during call {during + 1} (it was given to call {given + 1})"
    if prev is not None:
        return (f"your code modified `{name}` in place {when}; it is what your call {prev + 1} returned, and a caller "
                "may reuse it (e.g. to continue two different ways from one prefix cache). Never write into a tensor "
                "you returned or were given: build new ones (torch.cat) instead.")
    return (f"your code modified its input `{name}` in place {when}: the caller's tensors must be left unchanged. "
            "Use out-of-place operations (`x = x * s`, not `x *= s`; `masked_fill`, not `masked_fill_`) or work on "
            "a copy.")


def _given(p: Prepared, stage: str) -> str:
    """What the call a message is about was given, in the contract's names: " Call 2 was given Q [2, 5, 8], ..."."""

    found = re.search(r"\bcall (\d+)", stage)
    if found and 1 <= int(found.group(1)) <= len(p.case.steps):
        step = int(found.group(1)) - 1
        call = p.case.steps[step]
        said = [_arg(p.params[j] if j < len(p.params) else f"argument {j + 1}", a, p) for j, a in enumerate(call.args)]
        said += [_arg(k, v, p) for k, v in call.kwargs.items()]
        who = f"Call {step + 1}" if len(p.case.steps) > 1 else "The call"
    elif "__init__" in stage and p.case.init:
        said, who = [_arg(k, v) for k, v in p.case.init.items()], "The constructor"
    else:
        return ""
    said = [x for x in said if x]
    return f" {who} was given {', '.join(said)}." if said else ""


def _arg(name: str, v, p: Prepared | None = None) -> str:
    """One argument as the learner would name it: ``Q [2, 5, 8]``, ``mask [5, 7] bool``, ``n_rep=2``."""
    from torchcode.grader.cases import Alias, Config, Const, Prev, Refill

    if isinstance(v, (Alias, Refill)):
        params = p.params if p is not None else ()
        other = (v.arg if isinstance(v.arg, str) else params[v.arg] if v.arg < len(params)
                 else f"argument {v.arg + 1}")
        steps = len(p.case.steps) if p is not None else 2
        if steps > 1:
            other = f"{other} of call {v.step + 1}"
        if isinstance(v, Alias):
            return f"{name} = the same tensor object as `{other}`"
        return f"{name} = the same tensor object as `{other}`, given new values in place"
    if isinstance(v, Const):
        v = v.tensor
    if isinstance(v, torch.Tensor):
        kind = "" if v.is_floating_point() else " " + str(v.dtype).removeprefix("torch.")
        return f"{name} {list(v.shape)}{kind}"
    if isinstance(v, Prev):
        said = (f"{name} = " if name else "") + f"what call {v.step + 1} returned" + "".join(f"[{i}]" for i in v.path)
        if v.view and v.view[0] == "narrow":
            _, dim, start, length = v.view
            said += f" cut to its {'first ' if start == 0 else ''}{length} along dim {dim}" + (
                f" from {start}" if start else "") + " (a view)"
        elif v.view:
            said += f" reordered along dim {v.view[1]} as {list(v.view[2])}"
        return said
    if isinstance(v, (tuple, list)):
        inner = [_arg("", x).strip() for x in v]
        return f"{name} ({', '.join(inner)})" if all(inner) else ""
    if isinstance(v, Config):
        inner = [_arg(k, x) for k, x in v.fields.items()]
        return f"{name} ({', '.join(x for x in inner if x)})"
    if v is None or isinstance(v, (bool, int, float, str)):
        return f"{name}={v!r}"
    return ""


def _algorithm_problem(c, reply: dict) -> str | None:
    """The case's bounds on how the result is computed: the widest reduction, and how work grows with size."""
    n, op, shape = reply["widest"]
    if c.max_reduction is not None and n >= c.max_reduction:
        return (f"one operation of yours ({op} on a tensor of shape ({' x '.join(map(str, shape)) or '?'})) combined "
                f"{n:,} values into each of its results; this case allows fewer than {c.max_reduction:,}"
                + (f": {c.reduction_hint}" if c.reduction_hint else "") + ".")
    work = reply["work"]
    if c.max_work is not None and work and work[-1] > c.max_work:
        at = f" at S={c.sizes[-1]}" if c.sizes else ""
        return (f"your code's arithmetic{at} came to {int(work[-1]):,} (multiply-adds, elements reduced or written); "
                f"this case allows at most {c.max_work:,}" + (f": {c.work_hint}" if c.work_hint else "") + ".")
    if c.max_work_exponent is None or len(work) != len(c.sizes) or len(work) < 2:
        return None
    w0, w1, s0, s1 = float(work[0]), float(work[-1]), c.sizes[0], c.sizes[-1]
    if w0 <= 0 or w1 <= 0 or s1 <= s0:
        return None
    exponent = math.log(w1 / w0) / math.log(s1 / s0)
    if exponent <= c.max_work_exponent:
        return None
    counts = ", ".join(f"{int(w):,} at S={s}" for w, s in zip(work, c.sizes))
    return (f"your code's arithmetic grows like S^{exponent:.2f} ({counts}); this problem allows at most "
            f"S^{c.max_work_exponent:g}" + (f": {c.work_hint}" if c.work_hint else "") + ".")


def _dims(dims: dict | None, label: str) -> tuple[str, ...]:
    """The names of the last dimensions of the tensor ``label`` names ("output[1][0] of call 2", "Q (call 1)"):
    DIMS's entry for it, else for its name without indices ("output", "Q"), else none."""
    if not dims:
        return ()
    name = re.sub(r" \(the same tensor passed as .*\)$", "", label)  # an Alias's note
    name = re.sub(r" of call \d+$| \(call \d+\)$", "", name)
    while name not in dims and name.endswith("]"):
        name = name[:name.rindex("[")]
    return tuple(dims.get(name, ()))


# A gradient whose largest element is under this fraction of the case's largest gradient vanishes in exact arithmetic
# (float64 leaves 1e-14 of it): a correct float32 kernel that sums in another order leaves rounding noise of the
# cancelling terms' size there (cross_attention's W_k.bias on large inputs: 1.5e-5 against an atol of 1e-5).
VANISHING = 1e-9


def _peak(g: torch.Tensor) -> float:
    """A gradient's largest magnitude (NaN and inf counted as 0): the scale a vanishing gradient is judged on."""
    return g.detach().double().abs().nan_to_num(0.0, 0.0, 0.0).max().item()


def _grad(pol: GradingPolicy, what, got, gold, ref, spread=None, dims: tuple[str, ...] = (), largest: float = 0.0):
    """None when the gradient is right; else a Mismatch, or why it is missing or malformed (a message).
    ``largest``: the case's largest gradient element, the scale a vanishing gradient is judged on."""
    if gold is None or ref is None:
        return None
    vanishing = _peak(gold) <= VANISHING * largest
    if got is None or not isinstance(got, _LT):
        # none where the exact gradient is 0 is right: a key projection's bias shifts each query's scores by one
        # constant, which the softmax cancels (Whisper and BART leave it out of the keys)
        return None if vanishing else _no_grad(what)
    if tuple(got.tensor.shape) != tuple(gold.shape):  # autograd never gives one: the .grad was set by hand
        return (f"the {what} has shape {list(got.tensor.shape)}, expected {list(gold.shape)}: gradients must come "
                "from autograd (never set or replace .grad yourself)")
    # there, a few roundings of the grading dtype (compare.ROUNDINGS epsilons) of the largest gradient: not the
    # problem's relative floor, which is meant for a tensor's own scale (1e-5 of the largest let 0.03 through)
    return compare.compare(what, got.tensor, gold, ref, factor=pol.factor, floor=0.0 if vanishing else pol.floor,
                           spread=spread, dims=dims, scale=largest if vanishing else None)


class _LT:
    """A tensor the learner returned, with the device it was on."""

    def __init__(self, tensor: torch.Tensor, device: str):
        self.tensor, self.device = tensor, device


def _learner_value(v, tensors):
    if v is None:
        return None
    if isinstance(v, dict) and "T" in v:
        i = v["T"]
        if type(i) is not int or not 0 <= i < len(tensors):
            raise protocol.ProtocolError("bad tensor index")
        return _LT(tensors[i], str(v.get("device", "cpu"))[:40])
    if isinstance(v, dict) and "L" in v and isinstance(v["L"], list):
        return tuple(_learner_value(x, tensors) for x in v["L"])
    if isinstance(v, dict) and isinstance(v.get("X"), str):
        return Unsupported(v["X"][:200])
    raise protocol.ProtocolError("bad value")


# -- what a reply may look like -------------------------------------------------------------------
def malformed(e: Exception) -> str:
    return (f"your code's process sent back a malformed result ({str(e)[:120]}): did your code write to the "
            "grader's socket?")


def number(v, what: str) -> float:
    """A finite, non-negative JSON number of sane size; ProtocolError if not one."""
    if type(v) is int and 0 <= v <= 1 << 53:
        return v
    if type(v) is float and math.isfinite(v) and v >= 0:
        return v
    raise protocol.ProtocolError(f"bad {what}")


def clean_error(err) -> dict:
    """An error report with the types the trusted side expects, text cut to size; ProtocolError if not one."""
    if not isinstance(err, dict) or not all(isinstance(err.get(k, ""), str) for k in ("kind", "message", "traceback", "stage")):
        raise protocol.ProtocolError("bad error report")
    names = err.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise protocol.ProtocolError("bad error report")
    out = {"kind": err.get("kind", ""), "message": err.get("message", "")[:4000], "traceback": err.get("traceback", "")[:8000],
           "stage": err.get("stage", "")[:200], "names": [n[:200] for n in names[:16]]}
    if out["kind"] == "mutated":  # which input changed: small ints, a short name, a short index path
        small = lambda v: type(v) is int and 0 <= v < 1 << 16  # noqa: E731
        where, path, prev = err.get("where"), err.get("path") or [], err.get("prev")
        if not (small(err.get("during")) and small(err.get("given")) and (small(where) or isinstance(where, str))
                and isinstance(path, list) and len(path) <= 8 and all(small(i) for i in path)
                and (prev is None or small(prev))):
            raise protocol.ProtocolError("bad error report")
        out.update(during=err["during"], given=err["given"], where=where if small(where) else where[:100],
                   path=path, prev=prev)
    if out["kind"] == "output":  # a gradient that cannot be graded: which one
        if type(err.get("input")) is int and 0 <= err["input"] < 1 << 16:
            out["input"] = err["input"]
        elif isinstance(err.get("parameter"), str):
            out["parameter"] = err["parameter"][:200]
    return out


def clean_reply(reply: dict) -> dict:
    """A case reply checked field by field (types, ranges); ProtocolError if it is not one."""
    out = {"seconds": float(number(reply.get("seconds", 0.0), "time")),
           "largest": int(number(reply.get("largest", 0), "size")), "largest_shape": reply.get("largest_shape", [])}
    if type(reply.get("largest", 0)) is not int:
        raise protocol.ProtocolError("bad size")
    shape = out["largest_shape"]
    if not isinstance(shape, list) or len(shape) > protocol.MAX_DIMS or not all(type(x) is int for x in shape):
        raise protocol.ProtocolError("bad shape")
    widest = reply.get("widest", [0, "", []])
    if not (isinstance(widest, list) and len(widest) == 3 and type(widest[0]) is int and isinstance(widest[1], str)
            and isinstance(widest[2], list) and len(widest[2]) <= protocol.MAX_DIMS
            and all(type(x) is int for x in widest[2])):
        raise protocol.ProtocolError("bad reduction")
    out["widest"] = [int(number(widest[0], "size")), widest[1][:40], widest[2]]
    if "error" in reply:
        out["error"] = clean_error(reply["error"])
        return out
    outputs, ig, pg = reply.get("outputs"), reply.get("input_grads"), reply.get("param_grads")
    if not isinstance(outputs, list) or not isinstance(ig, dict) or not isinstance(pg, dict):
        raise protocol.ProtocolError("missing outputs or gradients")
    if not all(k.isdigit() and len(k) < 10 for k in ig):
        raise protocol.ProtocolError("bad gradient index")
    work = reply.get("work", [])
    if not isinstance(work, list) or len(work) > len(outputs):
        raise protocol.ProtocolError("bad work counts")
    out.update(outputs=outputs, input_grads=ig, param_grads=pg, work=[number(w, "work count") for w in work])
    return out


def _label(path, step, multi) -> str:
    name = "output" + "".join(f"[{i}]" for i in path)
    return name + (f" of call {step + 1}" if multi else "")


def _describe(v) -> str:
    if isinstance(v, _LT):
        return f"a tensor of shape {list(v.tensor.shape)}"
    if isinstance(v, tuple) and v:
        return f"a tuple of {len(v)} items"
    if isinstance(v, Unsupported):
        return f"a {v}"
    if v is None:
        return "None"
    if v == ():
        return "an empty tuple"
    return type(v).__name__


def _structure_problem(got, gold, ref, label: str = "output", device: str = "cpu") -> str | None:
    """Compare what the learner returned with the reference's structure, recursively."""
    if isinstance(gold, (tuple, list)):
        if not isinstance(got, tuple):
            return f"{label} should be a tuple of {len(gold)} items, got {_describe(got)}"
        if len(got) != len(gold):
            return f"{label} should be a tuple of {len(gold)} items, got a tuple/list of {len(got)}"
        for i, (a, b, r) in enumerate(zip(got, gold, ref)):
            problem = _structure_problem(a, b, r, f"{label}[{i}]", device)
            if problem:
                return problem
        return None
    if gold is None:
        return None if got is None else f"{label} should be None, got {_describe(got)}"
    if not isinstance(got, _LT):
        hint = " (convert numpy arrays back with torch.from_numpy, or better, stay in torch)" if "numpy" in str(got) else ""
        return f"{label} should be a torch.Tensor, got {_describe(got)}{hint}"
    t = got.tensor
    if tuple(t.shape) != tuple(ref.shape):
        return f"{label} has shape {list(t.shape)}, expected {list(ref.shape)}"
    if t.dtype != ref.dtype:
        made = (" A tensor made without dtype= is float32; after computing a step in float32, "
                "cast the result back with .to(x.dtype)") if t.dtype == torch.float32 else ""
        return f"{label} has dtype {t.dtype}, expected {ref.dtype}: return the inputs' dtype.{made}"
    if got.device.split(":")[0] != device:
        return f"{label} is on device {got.device}, expected {device} (keep the inputs' device)"
    return None


def _wrong(res: CaseResult, m: Mismatch) -> CaseResult:
    res.verdict, res.mismatch = Verdict.WRONG_ANSWER, m
    if m.bias is not None and m.bias_block:
        a, b = m.bias_block[:2]
        res.message = (f"{m.what} (shape {m.shape}) leans one way in some blocks of it (halves of dimensions {a} and "
                       f"{b}) and the other way in others: each block is off by a systematic {abs(m.bias):.2%} of its "
                       "scale on average (each element alone is within this dtype's tolerance, but rounding leans "
                       "neither way). Look for a scale or an offset that depends on where the element is, used only "
                       "in low precision")
        return res
    if m.bias is not None and m.bias_dim is not None:
        res.message = (f"{m.what} (shape {m.shape}) leans one way in some slices along dimension {m.bias_dim} and the "
                       "other way in others: "
                       f"each slice is off by a systematic {abs(m.bias):.2%} of its scale on average (each element alone "
                       "is within this dtype's tolerance, but rounding leans neither way). Look for a scale or an offset "
                       "that depends on the head, the row or the feature, used only in low precision")
        return res
    if m.bias is not None:
        res.message = (f"{m.what} leans one way: it is off by a systematic {m.bias:+.2%} of its scale (each element "
                       "alone is within this dtype's tolerance, but rounding leans neither way). Look for a scale, an "
                       "offset or a constant used only in low precision, or a step that always rounds one way")
        return res
    res.message = plain_mismatch(m) + (f". {m.detail[0].upper()}{m.detail[1:]}" if m.detail else "")
    return res



def _no_grad(what: str) -> str:
    name = what.removeprefix("gradient of ")
    if "." in name.split(" ")[0]:  # a module parameter (W_o.weight): maybe never used at all
        return (f"{name} got no gradient: your output does not depend on it. Use every parameter of the contract "
                "(is this projection applied?), and keep the computation connected to autograd (no .detach(), "
                ".data, .item() or torch.no_grad() on the way)")
    return (f"no {what} reached the input: part of your computation is cut off from autograd "
            "(.detach(), .data, .item(), torch.no_grad(), or building a new tensor from values)")


def _dtype(t) -> torch.dtype | None:
    return t.dtype if isinstance(t, torch.Tensor) else None


def _wrong_grad(res: CaseResult, m: Mismatch, dtype: torch.dtype | None) -> CaseResult:
    """Gradients are compared only once every output matched: say so, and where such bugs come from."""
    _wrong(res, m)
    res.message += (". Your outputs are right, only the gradients are not: look for a value cut off from autograd "
                    "(.detach(), .data, torch.no_grad(), a returned cache detached), a hand-written backward (a "
                    "torch.autograd.Function: compare it with torch.autograd.gradcheck on small float64 inputs), or "
                    "a torch.where whose unused branch is inf or NaN (its gradient is then NaN)")
    if dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).removeprefix("torch.")
        res.message += (f"; or, if this case passes in float32, a step of your backward that leaves {name}'s range or "
                        "precision (the gradient of a reciprocal 1 / x is scaled by 1 / x^2, which underflows: divide "
                        "by x instead). Compute that step in float32, or reorder it")
    return res


EXPECTED_GRAD_ERR = 0.25  # a random gradient's distance from the reference's own draw, relative to its size


def _grads_in_expectation(p: Prepared, in_grads: dict, p_grads: dict) -> str:
    """Gradients that are random (a training step with dropout; ``Case(compare_grads=False)``, whose batch holds
    copies of one input and whose outputs share one output gradient over the copies): every gradient the reference
    has must be there, of its shape and finite, and in float32 each, summed over the copies (a weight's already is;
    an input's over dim 0), within 25% of the reference's own draw: both estimate one expectation (a correct layer's
    is about 6% off on 2048 copies, at most 13% over 1000 seeds). '' when they are."""
    named = [(f"gradient of {p.leaf_labels[i]}", in_grads.get(i), g, True) for i, g in p.gold.input_grads.items()]
    named += [(f"gradient of {n}", p_grads.get(n), g, False) for n, g in p.gold.param_grads.items()]
    largest = max((_peak(g) for _, _, g, _ in named if g is not None and g.numel()), default=0.0)
    # none where the exact gradient is 0 is right (a key projection's bias: as _grad says)
    named = [x for x in named if x[2] is not None and not (x[1] is None and _peak(x[2]) <= VANISHING * largest)]
    for what, got, gold, _ in named:
        if got is None or not isinstance(got, _LT) or tuple(got.tensor.shape) != tuple(gold.shape):
            return (f"in this training step the {what} is missing or malformed: the output must stay "
                    "connected to autograd through dropout (F.dropout or nn.Dropout, never on .data, never detached)")
        if not torch.isfinite(got.tensor).all():
            return f"in this training step the {what} is not finite (inf or NaN)"
    if p.header.get("dtype") not in ("float32", "float64"):  # semantics in float32; low precision: robustness only
        return ""  # (autograd sums a weight's gradient in its own dtype: 2048 bfloat16 additions lose too much)
    sums = [(what, got.tensor.double(), gold.double(), per_copy) for what, got, gold, per_copy in named]
    sums = [(w, a.sum(0) if per_copy and a.dim() else a, b.sum(0) if per_copy and b.dim() else b)
            for w, a, b, per_copy in sums]
    largest = max((b.norm().item() for _, _, b in sums), default=0.0)
    for what, got, gold in sums:
        size = max(gold.norm().item(), 0.05 * largest)
        err = (got - gold).norm().item() / size if size > 0 else 0.0
        if err > EXPECTED_GRAD_ERR:
            return (f"in this training step the {what}, summed over many draws of dropout, is off by {err:.0%} of "
                    f"its size (a correct layer's is within {EXPECTED_GRAD_ERR:.0%}). Your outputs are right, only the "
                    "gradients are not: the backward must follow the dropout the forward applied, kept weights scaled "
                    "by 1 / (1 - p) in both (F.dropout or nn.Dropout on the attention weights; a hand-written backward "
                    "that forgets the scale, or one that drops the gradient, is off), and every path from the inputs to the output must stay connected to "
                    "autograd (no .detach(), .data or torch.no_grad() on the way; a cache detached where a later call "
                    "reads it cuts the gradient that reaches an earlier call's input through it; "
                    "torch.utils.checkpoint(use_reentrant=True) builds no graph when no input needs a gradient: pass "
                    "use_reentrant=False)")
    return ""


def _bad_grad(res: CaseResult, message: str) -> CaseResult:
    res.verdict, res.message = Verdict.WRONG_ANSWER, message
    return res


_ERROR_VERDICTS = {
    "syntax": Verdict.SYNTAX_ERROR, "interface": Verdict.BAD_INTERFACE, "not_implemented": Verdict.NOT_IMPLEMENTED,
    "forbidden": Verdict.FORBIDDEN_CALL, "runtime": Verdict.RUNTIME_ERROR, "memory": Verdict.MEMORY_LIMIT,
    "device": Verdict.WRONG_DEVICE, "output": Verdict.WRONG_OUTPUT,
}


_NOT_FINITE_CAUSES = ("NaN/inf come from exp() of large scores (subtract each row's maximum, or use torch.softmax), from a "
                      "row whose keys are all masked (check which keys each query may see), from masking after the "
                      "softmax (masked keys that took all the weight leave 0 / 0: mask the scores before it), or from "
                      "reading memory outside the tensor (torch.as_strided with strides that assume a contiguous input: "
                      "take them from x.stride()).")


TODO_ADVICE = ". Replace the TODOs with your implementation ({hint} shows the problem's hints one at a time)"
# a NotImplementedError in some cases only: the rest is written, what is left is these cases' input form
PARTIAL_ADVICE = ". Your code runs the other cases: handle this case's inputs too (what it checks is above)"


def unfinished_forms(cases: list[CaseResult]) -> None:
    """Where only some cases raise NotImplementedError, theirs say what is left, not "replace the TODOs"."""
    if any(c.verdict not in (Verdict.NOT_IMPLEMENTED, Verdict.NOT_RUN) for c in cases):
        for c in cases:
            if c.verdict is Verdict.NOT_IMPLEMENTED:
                c.message = c.message.replace(TODO_ADVICE, PARTIAL_ADVICE)


def error_result(res: CaseResult, err: dict) -> CaseResult:
    """The verdict of an error the worker reported (``err`` as ``clean_error`` returns it, or built here)."""
    kind = err.get("kind") if isinstance(err, dict) else None
    res.verdict = _ERROR_VERDICTS.get(kind, Verdict.RUNTIME_ERROR)
    res.traceback = str(err.get("traceback", ""))[:8000] if isinstance(err, dict) else ""
    msg = str(err.get("message", "")) if isinstance(err, dict) else ""
    if res.verdict is Verdict.NOT_IMPLEMENTED:
        said = " ".join(msg.split())[:120]
        msg = (f"not implemented yet: your code still raises NotImplementedError {err.get('stage', '')}"
               + (f" ({said!r})" if said else "") + TODO_ADVICE)
    elif res.verdict is Verdict.WRONG_DEVICE:
        msg += ". Create helper tensors (masks, aranges, zeros) on the inputs' device: device=x.device"
    elif res.verdict is Verdict.MEMORY_LIMIT and msg.startswith("ran out of GPU memory"):
        msg = (f"your code ran out of GPU memory {err.get('stage', '')}. Look for a tensor far larger than the inputs "
               "(a (S, S) score matrix per head is expected; one of (S, S, D) or kept across calls is not).")
    elif res.verdict is Verdict.MEMORY_LIMIT:
        msg = (f"your code ran out of memory {err.get('stage', '')}: the worker may use at most {{memory_mb}} MB "
               "(--memory-limit). Look for a tensor far larger than the inputs.")
    elif res.verdict is Verdict.FORBIDDEN_CALL:
        names = err.get("names") or []
        if names and err.get("stage") != "in its source":  # an escape hatch in the source: its message says why
            apis = [n for n in names if " " not in n]  # a library's function or class, by name
            said = [f"your code used {', '.join(apis)}, which this problem forbids: write it yourself from basic "
                    "tensor ops"] if apis else []
            msg = "; ".join(said + [f"your code used {n}" for n in names if n not in apis])  # each says why
    res.message = msg[:2000]
    return res
