"""LibreOffice recalculation: the workbook computes what Python computes.

Few soffice runs (each ~2-5 s): one batch for the T1 workbook, the tp=8 edit,
three random perturbations and the printer-trap workbook; one more run for an
edit made on an already-recalculated file (stale cached values).
"""

from __future__ import annotations

import math
import random

import openpyxl
import pytest
import sympy as sp
from excel_plans import (
    DERIVED_ORDER,
    GPUS,
    MODELS,
    V,
    inputs_display,
    python_eval,
    t1_plan,
)
from helpers import require_soffice

from concur.excel import recalc
from concur.excel.plan import Derived, Input, SheetVar, WorkbookPlan
from concur.excel.printer import py_eval
from concur.excel.recalc import (
    RecalcError,
    read_names,
    recalculate_many,
    recalculate_values,
    set_inputs,
    workbook_errors,
)
from concur.excel.writer import write_workbook

pytestmark = pytest.mark.libreoffice

INJECTIONS = ["=cmd|'/c calc'!A1", "#N/A", "@SUM(1)", "+1+1", "-2+3"]
S = sp.Symbol


def _trap_plan() -> tuple[WorkbookPlan, dict[str, float], dict[str, sp.Expr], dict[str, SheetVar]]:
    """Inputs with awkward names and texts; derived expressions hitting every printer trap."""
    ins = {
        "a": 2.0,
        "b": 3.0,
        "c": 0.1,
        "d": 0.1,
        "cpu2": -7.0,
        "TRUE": 5.0,
        "servers": 100.0,
        "load": 90.0,
        "mem": 1.5,
        "e_val": 20.0,
    }
    svars = {n: SheetVar(n, "", 1, INJECTIONS[i % len(INJECTIONS)]) for i, n in enumerate(ins)}
    svars["mem"] = SheetVar("mem", "GiB", 2**30, "memory in GiB")
    a, b, c, d, cpu2, t, srv, load, mem, ev = (S(n) for n in ins)
    exprs = {
        "neg_sq": -(a**2),  # -4, not 4
        "tower": sp.Pow(a, sp.Pow(b, 2)),  # 512, not 64
        "ceil_trap": sp.ceiling(c * b / d),  # 0.1*3/0.1 = 3.0000000000000004 -> 3
        "floor_trap": sp.floor(sp.Float(0.7) * t * 2),  # 6.999999999999999 -> 7
        "ln_e": sp.log(ev),
        "mod_neg": sp.Mod(cpu2, b),  # 2 in Python, Excel and sympy
        "pw": sp.Piecewise((a, cpu2 > 0), (b, t < 1), (a * b, True)),
        "maxmin": sp.Max(a, sp.Min(b, t)) - sp.Min(a, cpu2),
        "eb": sp.Function("erlang_b")(srv, load),
        "ec": sp.Function("erlang_c")(srv, load),
        "mem_mib": mem * 1,
        "ratio": sp.Rational(1, 3) * a + sp.sqrt(t) / b,
    }
    outs = {n: SheetVar(n, "", 1, f"trap {n}") for n in exprs}
    outs["mem_mib"] = SheetVar("mem_mib", "MiB", 2**20, "memory in MiB")
    env = {n: v * svars[n].scale for n, v in ins.items()}
    derived = []
    for n, e in exprs.items():
        val = py_eval(e, env) / outs[n].scale if e.free_symbols else float(e)
        derived.append(Derived(outs[n], e, f"{n} = {e}", "traps:1", val))
    plan = WorkbookPlan("traps", "printer traps", inputs=[Input(svars[n], v) for n, v in ins.items()], derived=derived)
    expected = {d.var.name: d.value for d in derived}
    return plan, expected, exprs, outs


def _perturbation(rng: random.Random) -> dict:
    while True:
        over = {
            "tp": rng.choice([2, 4, 8]),
            "mem_util": round(rng.uniform(0.8, 0.95), 3),
            "context": rng.choice([1024, 3000, 8192, 20000, 32768]),
            "overhead": round(rng.uniform(1, 6), 2),
            "kv_bytes": rng.choice([1, 2]),
        }
        model, gpu = rng.choice(sorted(MODELS)), rng.choice(sorted(GPUS))
        if python_eval(inputs_display(model, gpu, **over))["users"] >= 1:
            return {"model": model, "gpu": gpu, **over}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    require_soffice()
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("out")
    base = write_workbook(t1_plan(), src / "t1.xlsx")
    files = {"base": base, "tp8": set_inputs(base, {"tp": 8}, src / "t1_tp8.xlsx")}
    rng = random.Random(20240611)
    perturbations = []
    for i in range(3):
        p = _perturbation(rng)
        perturbations.append(p)
        files[f"p{i}"] = set_inputs(base, p, src / f"t1_p{i}.xlsx")
    trap_plan, trap_expected, _, trap_vars = _trap_plan()
    files["traps"] = write_workbook(trap_plan, src / "traps.xlsx")
    results = recalculate_many(list(files.values()), out)
    return {
        "paths": dict(zip(files, results)),
        "perturbations": perturbations,
        "traps": (trap_expected, trap_vars),
        "src": src,
    }


def test_t1_users_is_55_and_tp8_is_162(batch):
    base = read_names(batch["paths"]["base"], ["users", "kv_per_token", "kv_tokens"])
    assert base == {"users": 55, "kv_per_token": 81920, "kv_tokens": 451008}
    assert read_names(batch["paths"]["tp8"], ["users"]) == {"users": 162}


def test_sweeps_and_scenarios_recalculate(batch):
    wb = openpyxl.load_workbook(batch["paths"]["base"], data_only=True)
    ws = wb["Sweep tp"]
    head = next(c.row for c in ws["A"] if c.value == "tp [gpu]")
    users_by_tp = {ws.cell(r, 1).value: ws.cell(r, 2).value for r in range(head + 1, head + 6)}
    assert users_by_tp[4] == 55 and users_by_tp[8] == 162 and users_by_tp[16] == 188
    sc = wb["Scenarios"]
    last = [sc.cell(sc.max_row, col).value for col in range(3, 7)]
    assert sc.cell(sc.max_row, 1).value == "users"
    assert last == [55, 110, 162, 188]  # current, fp8 KV, TP8, TP16 (docs/t1-kv-cache.md)


def _assert_matches(values: dict, expected: dict) -> None:
    for name in DERIVED_ORDER:
        got, want = values[name], expected[name]
        assert not isinstance(got, str), f"{name}: {got}"
        if V[name].integer:
            assert got == want, name
        else:
            assert math.isclose(got, want, rel_tol=1e-9), (name, got, want)


@pytest.mark.parametrize("i", range(3))
def test_random_perturbations_match_python(batch, i):
    p = dict(batch["perturbations"][i])
    model, gpu = p.pop("model"), p.pop("gpu")
    expected = python_eval(inputs_display(model, gpu, **p))
    path = batch["paths"][f"p{i}"]
    _assert_matches(read_names(path), expected)
    assert workbook_errors(path) == []


def test_no_error_cells_anywhere(batch):
    for key in ("base", "tp8", "traps"):
        assert workbook_errors(batch["paths"][key]) == [], key


def test_printer_traps_agree_with_python(batch):
    expected, _ = batch["traps"]
    got = read_names(batch["paths"]["traps"], list(expected))
    assert got["neg_sq"] == -4 and got["tower"] == 512
    assert got["ceil_trap"] == 3 and got["floor_trap"] == 7
    assert got["mod_neg"] == 2 and got["pw"] == 6
    assert got["mem_mib"] == 1536
    for name, want in expected.items():
        assert math.isclose(got[name], want, rel_tol=1e-9, abs_tol=1e-12), (name, got[name], want)


def test_awkward_names_were_mangled_and_resolve(batch):
    got = read_names(batch["paths"]["traps"], ["v_c", "v_cpu2", "v_TRUE", "a"])
    assert got == {"v_c": 0.1, "v_cpu2": -7, "v_TRUE": 5, "a": 2}


def test_injection_text_survives_libreoffice_as_text(batch):
    ws = openpyxl.load_workbook(batch["paths"]["traps"], data_only=True)["Inputs"]
    head = next(c.row for c in ws["A"] if c.value == "Name")
    descriptions = [ws.cell(r, 4) for r in range(head + 1, ws.max_row + 1)]
    texts = {c.value for c in descriptions}
    assert set(INJECTIONS) <= texts
    assert all(c.data_type == "s" for c in descriptions)


def test_edit_after_recalculation_is_not_stale(batch, tmp_path):
    # The recalculated copy carries cached values; LibreOffice's default profile would keep them.
    edited = set_inputs(batch["paths"]["base"], {"tp": 8, "model": "llama-3.1-8b"}, tmp_path / "edited.xlsx")
    got = recalculate_values(edited, ["users", "params"])
    want = python_eval(inputs_display("llama-3.1-8b", tp=8))
    assert got == {"users": want["users"], "params": 8.03}


def test_missing_soffice_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(recalc.shutil, "which", lambda name: None)
    with pytest.raises(RecalcError, match="LibreOffice .* not on PATH"):
        recalc.recalculate(write_workbook(t1_plan(), tmp_path / "t.xlsx"))


def test_missing_soffice_fails_under_ci(monkeypatch):
    import helpers

    monkeypatch.setattr(helpers.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        helpers.require_soffice()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        helpers.require_soffice()
