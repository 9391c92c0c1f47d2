"""A workbook definition exported again replays its remembered plan and printed formulas
(concur.excel.memo): the same bytes as printing through sympy, and no sympy imported.

Counts calls and compares bytes (never times): every shipped definition's replayed workbook is
byte for byte the one written through sympy; a second export solves nothing; a changed pack
file or a changed definition is a miss; a child process exporting from a remembered plan has
not imported sympy when it exits (and has, exporting the first time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openpyxl")

from concur.excel import definition as definitions
from concur.excel import memo
from concur.excel.definition import export_definition, load_definition
from concur.excel.layout import Tape
from concur.excel.plan import Derived, Input, SheetVar, WorkbookPlan
from concur.excel.writer import write_workbook

WORKBOOKS = Path(__file__).resolve().parents[2] / "workbooks"
DEFINITIONS = sorted(WORKBOOKS.glob("*.yaml"))


@pytest.fixture
def solves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_cache_key: None) -> list[Any]:
    """A cache folder of this test's own; every definition this test really solved."""
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[Any] = []
    real = definitions.solve_definition

    def counting(defn: Any) -> Any:
        calls.append(defn)
        return real(defn)

    monkeypatch.setattr(definitions, "solve_definition", counting)
    return calls


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda p: p.stem)
def test_the_replayed_workbook_is_the_one_sympy_printed(definition: Path, tmp_path: Path, solves: list[Any]) -> None:
    printed = export_definition(definition, tmp_path / "printed.xlsx").read_bytes()
    replayed = export_definition(definition, tmp_path / "replayed.xlsx").read_bytes()
    assert len(solves) == 1, "the second export solved again: nothing was remembered"
    assert replayed == printed


def test_a_changed_pack_or_definition_is_solved_again(tmp_path: Path, solves: list[Any]) -> None:
    folder = tmp_path / "wb"
    shutil.copytree(WORKBOOKS / "packs", folder / "packs")
    shutil.copy(WORKBOOKS / "llm_capacity.yaml", folder / "llm_capacity.yaml")
    path = folder / "llm_capacity.yaml"
    export_definition(path, tmp_path / "a.xlsx")
    export_definition(path, tmp_path / "b.xlsx")
    assert len(solves) == 1
    pack = folder / "packs" / "llm_capacity.yaml"
    pack.write_text(pack.read_text() + "\n# edited\n")
    export_definition(path, tmp_path / "c.xlsx")
    assert len(solves) == 2  # the pack's bytes changed
    defn = load_definition(path)
    export_definition(replace(defn, title="Another title"), tmp_path / "d.xlsx")
    assert len(solves) == 3  # a definition read otherwise is another question
    export_definition(path, tmp_path / "e.xlsx", search_up_to=40)
    assert len(solves) == 4


def _implicit_plan() -> WorkbookPlan:
    import sympy as sp

    x, a = sp.Symbol("x"), sp.Symbol("a")
    root = Derived(
        SheetVar("x", "", 1, "x**2 = a"), None, "x**2 = a", "p.yaml:3", 2**0.5, implicit=True, residual=x**2 - a
    )
    twice = Derived(SheetVar("y", "GiB", 2.0**30, "2 x"), 2 * x * 2**30, "y = 2 x", "p.yaml:4", 2 * 2**0.5)
    return WorkbookPlan("imp", "", inputs=[Input(SheetVar("a", "", 1, "a"), 2.0)], derived=[root, twice])


@pytest.mark.parametrize("which", ["synthetic", "implicit"])
def test_a_plan_read_back_replays_the_formulas_printed_for_it(which: str, tmp_path: Path) -> None:
    """Plans no shipped definition has: sweeps, scenarios, max/floor/ceil (the benchmark's
    synthetic plan), an implicit row's residual; through JSON as the cache keeps them."""
    from concur.bench.export import synthetic_plan

    plan = synthetic_plan() if which == "synthetic" else _implicit_plan()
    tape = Tape()
    printed = write_workbook(plan, tmp_path / "printed.xlsx", tape).read_bytes()
    assert tape.entries and all(isinstance(e, (str, list)) for e in tape.entries)
    payload = json.loads(json.dumps({"deps": [], "plan": memo._encode(plan), "tape": tape.entries}))
    _, back, entries = memo._decode(payload)
    replayed = write_workbook(back, tmp_path / "replayed.xlsx", Tape(entries)).read_bytes()
    assert replayed == printed
    with pytest.raises(RuntimeError, match="replayed past its end"):
        write_workbook(back, tmp_path / "short.xlsx", Tape(entries[:-1]))
    with pytest.raises(RuntimeError, match="1 entries left over"):
        write_workbook(back, tmp_path / "long.xlsx", Tape([*entries, "x"]))
    assert not (tmp_path / "short.xlsx").exists() and not (tmp_path / "long.xlsx").exists()


def _imported_by_export(definition: Path, out: Path, env: dict[str, str]) -> set[str]:
    """The top-level packages a ``concur export`` child process imported (``-X importtime``)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "concur.cli", "export", str(definition), "-o", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    names = [line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in names}


def test_exporting_from_a_remembered_plan_imports_no_sympy(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCUR_")}
    env |= {"CONCUR_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    definition = WORKBOOKS / "llm_fleet.yaml"
    first = _imported_by_export(definition, tmp_path / "a.xlsx", env)
    assert "sympy" in first  # printing through sympy: the test can see the import
    again = _imported_by_export(definition, tmp_path / "b.xlsx", env)
    assert "openpyxl" in again
    assert not again & {"sympy", "mpmath"}
    assert (tmp_path / "b.xlsx").read_bytes() == (tmp_path / "a.xlsx").read_bytes()
