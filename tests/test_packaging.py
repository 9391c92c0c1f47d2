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

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr
    return next(out.glob("concur-*.whl"))


def test_wheel_contains_packs_and_catalogs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for pack in ROOT.glob("formulas/*.yaml"):
        assert f"concur/formulas/{pack.name}" in names
    for cat in ROOT.glob("formulas/catalogs/*.yaml"):
        assert f"concur/formulas/catalogs/{cat.name}" in names
    assert "concur/lang/data/units.txt" in names
    assert "concur/formulas/index.json" in names  # the shipped pack index: a cold solve parses only its pack
    assert "concur/native/counter_bench.c" in names
    for asset in ("index.html", "app.js", "style.css"):  # concur serve's page: nothing is fetched from elsewhere
        assert f"concur/cli/web/static/{asset}" in names


def test_installed_wheel_solves(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import concur, json; from concur.lang.library import formulas_dir; "
        "s = concur.solve('users', {'model': 'llama-3.1-70b', 'gpu': 'h100-sxm-80gb', 'tp': 8, "
        "'context': '8192 token'}); print(json.dumps([concur.__file__, str(formulas_dir()), s.value('users')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    module, formulas, users = json.loads(out.stdout)
    assert module.startswith(str(target)) and formulas.startswith(str(target))
    assert users == 162


def _loaded_after(statement: str, cache: Path | None = None) -> set[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "CONCUR_CACHE_DIR": str(cache)} if cache else None
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_primitives_import_is_light():
    mods = _loaded_after(
        "import concur.primitives as p; p.TokenBucket; p.WorkerPool; p.ShardedCounter; p.WorkStealingDeque"
    )
    assert not mods & {"sympy", "pint", "openpyxl", "numpy", "click", "matplotlib", "concur.solver.question"}


def test_help_loads_no_engine_module():
    """``concur --help`` (and shell completion) loads the command modules for their help text and
    nothing of the engine: the commands import the engine inside their functions."""
    mods = _loaded_after("from concur.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    ours = {m for m in mods if m == "concur" or m.startswith("concur.")}
    assert "concur.cli.commands.solve" in ours  # the probe sees the commands load
    assert sorted(m for m in ours if not m.startswith("concur.cli") and m not in {"concur", "concur.errors"}) == []


HEAVY = {"sympy", "numpy", "openpyxl", "matplotlib", "rich", "PIL"}


@pytest.mark.parametrize("pack", ["", "ok", "broken"])
def test_check_imports_nothing_heavy(pack, tmp_path):
    """The pre-commit hook's path: clean packs, a user's pack, and a pack reported problem by problem."""
    body = {
        "ok": "variables:\n  a: {unit: furlong/fortnight}\n  b: {unit: s}\n  x: {unit: furlong}\n"
        "equations:\n  - x = a * b\n",
        "broken": "variables:\n  a: {unit: GiB}\n  y: {unit: nope}\nequations:\n  - a = a + 1\n  - a = (\n",
    }
    args = []
    if pack:
        (tmp_path / f"{pack}.yaml").write_text(f"pack: {pack}\n" + body[pack])
        args = [str(tmp_path / f"{pack}.yaml")]
    for fmt in ("text", "json", "github"):
        mods = _loaded_after(
            f"from concur.cli import main\ntry:\n    main(['check', '--format', '{fmt}', *{args!r}])\n"
            "except SystemExit:\n    pass",
            cache=tmp_path / f"cache-{fmt}",
        )  # units not cached: pint
        assert not {m.split(".")[0] for m in mods} & HEAVY, (fmt, sorted(m for m in mods if m.split(".")[0] in HEAVY))


@pytest.mark.parametrize("find", ["replicas", "users"])
def test_warm_solve_imports_no_sympy_numpy_pint_or_yaml(find, tmp_path):
    """The default questions, asked twice: the second run reads the parsed packs, the unit facts and the
    closed forms (loops and inversions alike) from the cache folder, so nothing heavy is imported."""
    statement = (
        f"from concur.cli import main\ntry:\n    main(['solve', '--find', '{find}'])\n"
        "except SystemExit as exc:\n    assert exc.code == 0, exc.code"
    )  # answered, not refused
    _loaded_after(statement, cache=tmp_path)  # cold: fills the cache
    mods = {m.split(".")[0] for m in _loaded_after(statement, cache=tmp_path)}
    assert not mods & {"sympy", "numpy", "pint", "ruamel", "rich", "mpmath"}, sorted(mods)


def test_core_dependencies_leave_out_the_extras():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("<")[0].split("=")[0].strip().lower() for d in project["dependencies"]}
    assert {"click", "ruamel.yaml", "pint", "sympy", "numpy"} <= core  # what `pip install .` needs to solve
    assert not core & {"openpyxl", "matplotlib", "torch", "simpy"}
    extras = project["optional-dependencies"]
    for extra, module in (("excel", "openpyxl"), ("plot", "matplotlib"), ("calibrate", "torch")):
        assert any(d.startswith(module) for d in extras[extra]), extra
    for module in ("openpyxl", "matplotlib"):  # `all` and `test` keep today's full set
        assert any(d.startswith(module) for d in extras["all"]) and any(d.startswith(module) for d in extras["test"])


def test_missing_extra_is_one_line_naming_it(tmp_path):
    """Without matplotlib / openpyxl installed, the command says which extra to install (exit 2)."""
    for blocked, argv, extra in (
        (
            "matplotlib",
            [
                "sweep",
                "littles_law",
                "--over",
                "arrival_rate=1,2",
                "--find",
                "in_flight",
                "--set",
                "residence_time=3",
                "--plot",
                str(tmp_path / "p.png"),
            ],
            "plot",
        ),
        (
            "openpyxl",
            [
                "export",
                "littles_law",
                "--find",
                "in_flight",
                "--set",
                "arrival_rate=1",
                "--set",
                "residence_time=3",
                "-o",
                str(tmp_path / "w.xlsx"),
            ],
            "excel",
        ),
    ):
        code = f"import sys; sys.modules[{blocked!r}] = None\nfrom concur.cli import main\nmain({argv!r})"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and f"pip install 'concur[{extra}]'" in out.stderr, out.stderr
        assert not list(tmp_path.iterdir())
