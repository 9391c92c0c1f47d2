"""Every pack's ``examples:`` run through the solver (cases as data, one generic test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from concur.errors import ConcurError
from concur.lang.library import get_pack, pack_paths
from concur.lang.model import build_model
from concur.lang.units import unit_info
from concur.solver.examples import run_example


def _cases():
    for name in pack_paths():
        try:
            pack = get_pack(name)
        except ConcurError as exc:  # a broken pack fails its own test instead of breaking collection
            yield pytest.param(name, exc, id=f"{name}: does not load")
            continue
        for ex in pack.examples:
            yield pytest.param(name, ex, id=f"{name}: {ex.name}")


@pytest.mark.parametrize("pack_name, example", list(_cases()))
def test_example(pack_name, example):
    """The same check ``concur check`` runs (concur.solver.examples): expectations in display units."""
    if isinstance(example, ConcurError):
        pytest.fail(f"pack {pack_name} does not load: {example}")
    problems = run_example(build_model([pack_name]), example)
    assert not problems, f"{example.where}: {problems}"


def test_a_wrong_example_fails_concur_check(tmp_path):
    """Regression: check used to pass a pack whose example expects 21 for b = 2 a with a = 10 s."""
    pack = tmp_path / "wrong.yaml"
    pack.write_text(
        "pack: wrong\nvariables:\n  a: {unit: s}\n  b: {unit: s}\nequations:\n  - b = 2 * a\n"
        "examples:\n  - name: twice ten\n    given: {a: 10 s}\n    find: [b]\n    expect:\n      b: 21\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "concur.cli", "check", str(pack)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1
    assert f"{pack}:8:5: error: example 'twice ten': b: expected 21 (rel 1e-06), got 20 s" in out.stdout


def test_shipped_closed_forms_are_current(tmp_path, monkeypatch):
    """The closed forms shipped for the examples (so check runs them without sympy) match the packs."""
    from concur.solver import closed_form_table, closed_forms

    shipped = closed_forms.SHIPPED.read_text()
    monkeypatch.setattr(closed_forms, "SHIPPED", tmp_path / "closed-forms.json")
    assert closed_form_table.write_shipped_table().read_text() == shipped, (
        "stale: run python -m concur.solver.closed_form_table and commit engine/concur/solver/data/closed-forms.json"
    )


def test_every_shipped_pack_has_examples():
    missing = [n for n in pack_paths() if not get_pack(n).examples]
    assert not missing, f"packs without examples: {missing}"


def test_unit_info_refuses_ambiguous_spellings():
    with pytest.raises(ConcurError, match="kB"):
        unit_info("KB")
