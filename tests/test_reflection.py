"""Reflection refused at run time (torchcode/grader/reflection.py): names built from strings, frames, the garbage
collector and the mode stacks reach nothing of the grader's, from the submission, a helper beside it or a string it
runs; and the standard library's everyday introspection still works. The hostile corpus (tests/hostile/*guard*,
*frames*) holds the whole attacks, each accepted before this layer."""

from __future__ import annotations

import pytest

from conftest import FIXTURES

FLASH = """
import math

import torch


def flash_attention(Q, K, V, block_size=32):
    {body}
    B, S, D = Q.shape
    out = []
    for qs in range(0, S, block_size):
        q = Q[:, qs:qs + block_size] / math.sqrt(D)
        m = torch.full((B, q.shape[1], 1), float("-inf"), dtype=Q.dtype)
        l, acc = torch.zeros(B, q.shape[1], 1, dtype=Q.dtype), torch.zeros(B, q.shape[1], D, dtype=Q.dtype)
        for ks in range(0, S, block_size):
            s = q @ K[:, ks:ks + block_size].transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
            l, acc, m = alpha * l + p.sum(-1, keepdim=True), alpha * acc + p @ V[:, ks:ks + block_size], m_new
        out.append(acc / l)
    return torch.cat(out, 1)
"""


def test_everyday_standard_library_introspection_is_accepted(grader, catalog):
    report = grader.grade(catalog.get("sdpa"), FIXTURES / "sdpa_with_stdlib_introspection.py", seed=5)
    assert report.passed, report.message


@pytest.mark.parametrize("body,said", [
    # a name built at run time, read by getattr, from the submission itself
    ("getattr(torch.set_num_threads, '__glob' + 'als__')", "getattr(..., '__globals__')"),
    # the same from a string the submission runs
    ("exec(\"getattr(torch.set_num_threads, '__glob' + 'als__')\")", "getattr(..., '__globals__')"),
    # a class's attribute dictionary, where a built name finds the descriptor getattr refuses
    ("vars(type(flash_attention))['__glob' + 'als__']", "vars() of a class or module"),
    ("__import__('g' + 'c').__dict__['get_' + 'objects']()", "gc.get_objects"),
    ("__import__('traceback').extract_stack(); __import__('sys').__dict__['_get' + 'frame']()", "sys._getframe"),
    ("import torch.utils._python_dispatch as pd; pd.__dict__['_pop_' + 'mode']()", "_pop_mode"),
])
def test_reflection_from_the_submission_is_refused(grader, catalog, tmp_path, body, said):
    path = tmp_path / "flash_attention.py"
    path.write_text(FLASH.replace("{body}", body))
    report = grader.grade(catalog.get("flash_attention"), path, seed=5, only=["even_blocks"])
    assert report.verdict.value == "forbidden_call" and said in report.message, report.message


def test_a_helper_beside_the_file_is_the_learners_code_too(grader, catalog, tmp_path):
    """Who asks is told by the file of the code asking: a helper module imported from the submission's folder is
    the learner's, as the file is; torch's own code reading the same (torch.jit.script reads a function's globals)
    is not refused."""
    (tmp_path / "helpers.py").write_text(
        "import torch\n\n\ndef peek():\n    return getattr(torch.set_num_threads, '__glob' + 'als__')\n")
    path = tmp_path / "flash_attention.py"
    path.write_text("from helpers import peek\n" + FLASH.replace("{body}", "peek()"))
    report = grader.grade(catalog.get("flash_attention"), path, seed=5, only=["even_blocks"])
    assert report.verdict.value == "forbidden_call" and "__globals__" in report.message, report.message
    path.write_text(FLASH.replace("{body}", "pass"))  # the same kernel without the peek
    report = grader.grade(catalog.get("flash_attention"), path, seed=5, only=["even_blocks"])
    assert report.passed, report.message
