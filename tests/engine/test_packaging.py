"""The built wheel ships the packs and catalogs and the installed tool finds them;
``import concur.primitives`` and ``concur check`` stay free of heavy imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return next(out.glob("concur-*.whl"))


def test_wheel_contains_packs_and_catalogs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for pack in ROOT.glob("formulas/*.yaml"):
        assert f"concur/formulas/{pack.name}" in names
    for cat in ROOT.glob("formulas/catalogs/*.yaml"):
        assert f"concur/formulas/catalogs/{cat.name}" in names
    assert "concur/lang/data/units.txt" in names
    assert "concur/native/counter_bench.c" in names


def test_installed_wheel_solves(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import concur, json; from concur.lang.library import formulas_dir; "
            "s = concur.solve('users', {'model': 'llama-3.1-70b', 'gpu': 'h100-sxm-80gb', 'tp': 8, "
            "'context': '8192 token'}); print(json.dumps([concur.__file__, str(formulas_dir()), s.value('users')]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    module, formulas, users = json.loads(out.stdout)
    assert module.startswith(str(target)) and formulas.startswith(str(target))
    assert users == 162


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_primitives_import_is_light():
    mods = _loaded_after("import concur.primitives as p; p.TokenBucket; p.WorkerPool; p.ShardedCounter; "
                         "p.WorkStealingDeque")
    assert not mods & {"sympy", "pint", "openpyxl", "numpy", "click", "matplotlib", "concur.solver.question"}


def test_check_does_not_import_sympy():
    mods = _loaded_after("from concur.cli import main\ntry:\n    main(['check'])\nexcept SystemExit:\n    pass")
    assert "sympy" not in mods and "openpyxl" not in mods and "matplotlib" not in mods
