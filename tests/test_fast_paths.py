"""Commands that do not grade never import torch; the wheel ships the whole course."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile

import pytest

from conftest import ROOT

PROBE = textwrap.dedent("""
    import sys
    from torchcode.cli import main
    sys.argv = ["torchcode"] + sys.argv[1:]
    try:
        main()
    except SystemExit:
        pass
    assert "torch" not in sys.modules, "torch was imported"
    print("NO-TORCH-OK")
""")


@pytest.mark.parametrize("args", [["list"], ["show", "gqa"], ["start", "sdpa"], ["hint", "mha"], ["status"],
                                  ["reset", "sdpa"], ["solution", "sdpa", "--yes"], ["--help"]])
def test_command_does_not_import_torch(args, workdir):
    p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=workdir, capture_output=True, text=True, timeout=60)
    assert "NO-TORCH-OK" in p.stdout, p.stdout + p.stderr


def test_wheel_ships_problems_solutions_templates(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0 and "hatchling" in p.stderr:
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0 and "No matching distribution found for hatchling" in p.stderr:
            pytest.skip("cannot build a wheel here: hatchling is not installed and no package index is reachable")
    assert p.returncode == 0, p.stderr
    wheel = next(tmp_path.glob("torchcode-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for problem in (ROOT / "problems").iterdir():
        if problem.is_dir():
            assert f"torchcode/_builtin/problems/{problem.name}/problem.toml" in names
            assert f"torchcode/_builtin/solutions/{problem.name}.py" in names
            assert f"torchcode/_builtin/templates/{problem.name}.py.j2" in names
    # run the installed (unpacked) wheel, away from the source tree: it finds its own course
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import torchcode.paths as p; print(p.builtin_pack())", str(site)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == str(site / "torchcode" / "_builtin"), r.stderr
