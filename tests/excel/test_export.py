"""``concur export`` and :func:`plan_from_solution`, verified by LibreOffice.

The LibreOffice checks run in TWO soffice starts (module fixture ``recalculated``): one
recalculates the T1 workbook and its tp=8 edit, one workbook per pack example, every
standard workbook and three random input perturbations of each, and the hostile-pack
workbook; the other prints the examples' and the standard workbooks to PDF, whose text
must show no ``###`` and no error value. Without soffice (or poppler's pdftotext) these
tests skip, except under CI=true where they fail.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
import sympy

pytest.importorskip("openpyxl")

from helpers import require_poppler, require_soffice

from concur.cli import main
from concur.errors import ConcurError
from concur.excel.definition import export_definition, load_definition, plan_for, solve_definition
from concur.excel.from_solution import plan_from_solution
from concur.excel.writer import write_workbook
from concur.lang.library import get_pack, pack_paths
from concur.lang.model import build_model
from concur.solver.question import solve_model

WORKBOOKS = Path(__file__).resolve().parents[2] / "workbooks"
T1_ARGS = [
    "export",
    "llm_memory",
    "--find",
    "users",
    "--set",
    "model=llama-3.1-70b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "tp=4",
    "--set",
    "kv_dtype=bf16",
    "--set",
    "weight_dtype=bf16",
    "--set",
    "context=8192 token",
    "--set",
    "overhead=4 GiB",
    "--set",
    "mem_util=0.9",
]
HOSTILE = """\
pack: hostile
doc: "=cmd|'/c calc'!A1"
variables:
  cpu2: {unit: s, doc: "=cmd|'/c calc'!A1", bounds: [0, null]}
  "true": {doc: "@SUM(1,1)"}
  rate: {unit: 1/s, doc: "+HYPERLINK(1)"}
equations:
  - eq: rate = true / cpu2
    doc: "=1+1"
"""


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def close(got: Any, want: float, integer: bool) -> bool:
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    if integer:
        return got == want
    return abs(got - want) <= 1e-9 * max(abs(want), 1e-300)


def example_cases() -> list[tuple[str, int, Any]]:
    cases = []
    for name in pack_paths():
        for i, ex in enumerate(get_pack(name).examples):
            if ex.error is None:
                cases.append((name, i, ex))
    return cases


EXAMPLES = example_cases()


def perturbations(defn: Any, model: Any, plan: Any, seed: int) -> list[dict[str, float]]:
    """Three valid random edits of free numeric inputs (integers doubled or halved).

    An edit the engine refuses (the model no longer fits) is drawn again.
    """
    rng = random.Random(seed)
    free = [i for i in plan.inputs if not i.var.choices and i.preset is None and i.var.name in defn.given]
    out: list[dict[str, float]] = []
    for _ in range(50):
        if len(out) == 3:
            break
        edit = {}
        for inp in rng.sample(free, k=min(2, len(free))):
            lo, hi = inp.var.bounds
            if inp.var.integer:
                value = inp.value * 2 if rng.random() < 0.5 or inp.value < 2 else inp.value // 2
            else:
                value = round(inp.value * rng.uniform(0.7, 1.4), 6)
            if hi is not None:
                value = min(value, hi)
            if lo is not None:
                value = max(value, lo)
            edit[inp.var.name] = value
        try:
            fresh_solve(defn, model, plan, edit)
        except ConcurError:
            continue
        out.append(edit)
    assert len(out) == 3, f"{defn.title}: no three valid perturbations"
    return out


def fresh_solve(defn: Any, model: Any, plan: Any, edit: dict[str, float]) -> Any:
    """Solve the definition with ``edit`` (numbers in the unit the Inputs sheet shows) applied."""
    given = dict(defn.given)
    shown = {i.var.name: i.var.unit for i in plan.inputs}
    for name, value in edit.items():
        unit = shown[name]
        given[name] = f"{value!r} {unit}" if unit else value
    return solve_model(model, defn.find, given)


@pytest.fixture(scope="module")
def recalculated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Write every workbook, recalculate all of them in one LibreOffice run."""
    require_soffice()
    require_poppler()
    from concur.excel.recalc import recalculate_many, set_inputs
    from concur.excel.render import render_pdfs

    tmp = tmp_path_factory.mktemp("export")
    jobs: dict[str, Path] = {}
    meta: dict[str, Any] = {}
    code = main_quiet(T1_ARGS + ["-o", str(tmp / "cap.xlsx")])
    assert code == 0
    jobs["cap"] = tmp / "cap.xlsx"
    jobs["cap_tp8"] = set_inputs(tmp / "cap.xlsx", {"tp": 8}, tmp / "cap_tp8.xlsx")
    for name, i, ex in EXAMPLES:
        model = build_model([name])
        try:
            sol = solve_model(model, ex.find, ex.given)
        except ConcurError as exc:
            meta[f"ex_{name}_{i}"] = exc
            continue
        plan = plan_from_solution(sol, ex.name)
        jobs[f"ex_{name}_{i}"] = write_workbook(plan, tmp / f"ex_{name}_{i}.xlsx")
        meta[f"ex_{name}_{i}"] = plan
    for k, definition in enumerate(sorted(WORKBOOKS.glob("*.yaml"))):
        defn = load_definition(definition)
        model, sol = solve_definition(defn)
        plan = plan_for(model, sol, defn.title, defn.sweeps, defn.scenarios, doc=defn.doc)
        base = export_definition(definition, tmp / f"wb_{definition.stem}.xlsx")
        jobs[f"wb_{definition.stem}"] = base
        for j, edit in enumerate(perturbations(defn, model, plan, seed=1000 + k)):
            key = f"wb_{definition.stem}_{j}"
            jobs[key] = set_inputs(base, edit, tmp / f"{key}.xlsx")
            meta[key] = (defn, model, plan, edit)
    hostile_dir = tmp / "hostile"
    hostile_dir.mkdir()
    (hostile_dir / "hostile.yaml").write_text(HOSTILE)
    code = main_quiet(
        [
            "export",
            str(hostile_dir / "hostile.yaml"),
            "--find",
            "rate",
            "--set",
            "cpu2=2 s",
            "--set",
            "true=3",
            "-o",
            str(tmp / "hostile.xlsx"),
        ]
    )
    assert code == 0
    jobs["hostile"] = tmp / "hostile.xlsx"
    outs = recalculate_many(list(jobs.values()), tmp / "recalc")
    printed = [p for k, p in jobs.items() if k.startswith("ex_")]
    printed += sorted(WORKBOOKS.glob("*.xlsx"))  # the committed files, as handed over
    pdfs = dict(zip(printed, render_pdfs(printed, tmp / "pdf")))
    return {"out": dict(zip(jobs, outs)), "src": jobs, "meta": meta, "pdf": pdfs}


def main_quiet(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


# ------------------------------------------------------------------ the T1 numbers (docs/t1-kv-cache.md)


def test_t1_users_is_55_and_162_after_typing_tp_8(recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names, workbook_errors

    assert read_names(recalculated["out"]["cap"], ["users"]) == {"users": 55}
    assert read_names(recalculated["out"]["cap_tp8"], ["users", "kv_per_token"]) == {
        "users": 162,
        "kv_per_token": 40960,
    }
    assert workbook_errors(recalculated["out"]["cap"]) == []


@pytest.mark.parametrize("case", EXAMPLES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_pack_example_round_trips(case: tuple[str, int, Any], recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names, workbook_errors

    key = f"ex_{case[0]}_{case[1]}"
    plan = recalculated["meta"][key]
    if isinstance(plan, ConcurError):
        pytest.skip(f"the engine does not solve this example ({plan.message}); the pack tests report it")
    out = recalculated["out"][key]
    assert workbook_errors(out) == []
    values = read_names(out)
    names = _names(recalculated["src"][key])
    for d in plan.derived:
        got = values[names[d.var.name]]
        assert close(got, d.value, d.var.integer), f"{d.var.name}: sheet {got!r}, engine {d.value!r}"
    for inp in plan.inputs:
        if not inp.var.choices:
            assert close(values[names[inp.var.name]], inp.value, False), inp.var.name


@pytest.mark.parametrize("stem", sorted(p.stem for p in WORKBOOKS.glob("*.yaml")))
@pytest.mark.parametrize("j", range(3))
def test_changed_inputs_equal_a_fresh_solve(stem: str, j: int, recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names, workbook_errors

    key = f"wb_{stem}_{j}"
    defn, model, plan, edit = recalculated["meta"][key]
    sol = fresh_solve(defn, model, plan, edit)
    out = recalculated["out"][key]
    assert [e for e in workbook_errors(out) if not e.startswith("Sweep")] == []
    values = read_names(out)
    for d in plan.derived:
        if d.var.name not in sol:  # only an if_ branch the solver did not take reads it
            assert "if_ branch" in d.equation, d.var.name
            continue
        want = sol.value(d.var.name)
        assert close(values[d.var.name], want, d.var.integer), (
            f"{stem} {edit}: {d.var.name} sheet {values[d.var.name]!r}, fresh solve {want!r}"
        )


def test_printed_workbooks_show_no_hashes_or_errors(recalculated: dict[str, Any]) -> None:
    from concur.excel.render import pdf_text, print_problems

    assert len(recalculated["pdf"]) >= len(EXAMPLES) // 2 + 6
    bad = {src.name: print_problems(pdf_text(pdf))[:3] for src, pdf in recalculated["pdf"].items()}
    assert {k: v for k, v in bad.items() if v} == {}
    first = pdf_text(recalculated["pdf"][WORKBOOKS / "llm_capacity.xlsx"]).split("\f")[0]
    assert "$87,600" in first and "$3.16" in first and "does not fit" not in first
    assert re.search(r"replicas\s+12\b", first) and re.search(r"users\s+55\b", first)


def test_infeasible_sweep_point_reads_does_not_fit(recalculated: dict[str, Any]) -> None:
    import openpyxl

    ws = openpyxl.load_workbook(recalculated["out"]["wb_llm_capacity"], data_only=True)["Sweep tp"]
    head = next(c.row for c in ws["A"] if c.value == "tp")
    users = {ws.cell(r, 1).value: ws.cell(r, 2).value for r in range(head + 1, head + 5)}
    assert users == {1: "does not fit", 2: 1, 4: 55, 8: 162}
    charted = [c.value for c in ws[head + 1] if c.data_type == "e"]
    assert charted == ["#N/A"]  # a gap in the chart, not a point at 0 or -26


def _literals(formula: str) -> list[str]:
    """Numeric literals in a formula (not in strings, names or cell references)."""
    return [m.group(1) for m in _NUMBER.finditer(formula) if m.group(1)]


_NUMBER = re.compile(r'"[^"]*"|(?<![A-Za-z_$.\d])(\d+(?:\.\d*)?|\.\d+)(?:E[-+]?\d+)?', re.IGNORECASE)


def test_no_formula_holds_a_long_literal(recalculated: dict[str, Any]) -> None:
    import openpyxl

    assert _literals('=1056269593800965053637369973213*a/3600+POWER(x,2)+A1+"12345678901234567"') == [
        "1056269593800965053637369973213",
        "3600",
        "2",
    ]
    books = sorted(WORKBOOKS.glob("*.xlsx")) + [p for k, p in recalculated["src"].items() if k.startswith("ex_")]
    longest = (0, "")
    for book in books:
        for ws in openpyxl.load_workbook(book).worksheets:
            for row in ws.iter_rows():
                for cell in row:
                    if cell.data_type != "f":
                        continue
                    for lit in _literals(cell.value):
                        digits = len(lit.replace(".", "").lstrip("0"))
                        if digits > longest[0]:
                            longest = (digits, f"{book.name} {ws.title}!{cell.coordinate}: {cell.value[:200]}")
    assert longest[0] < 16, longest
    assert len(books) > 30


def test_hostile_text_stays_text_and_names_are_valid(recalculated: dict[str, Any]) -> None:
    import openpyxl

    from concur.excel.names import is_valid_name
    from concur.excel.recalc import read_names

    src = openpyxl.load_workbook(recalculated["src"]["hostile"])
    assert set(src.defined_names) >= {"v_cpu2", "v_true", "rate"}
    assert all(is_valid_name(n) for n in src.defined_names)
    texts = [
        c
        for ws in src.worksheets
        for row in ws.iter_rows()
        for c in row
        if isinstance(c.value, str) and c.value.startswith(("=cmd", "@SUM", "+HYPER", "=1+1"))
    ]
    assert {c.value for c in texts} >= {"=cmd|'/c calc'!A1", "@SUM(1,1)", "+HYPERLINK(1)"}
    assert all(c.data_type == "s" for c in texts)
    assert read_names(recalculated["out"]["hostile"], ["rate", "v_cpu2", "v_true"]) == {
        "rate": 1.5,
        "v_cpu2": 2,
        "v_true": 3,
    }


def _names(path: Path) -> dict[str, str]:
    """variable -> defined name (renamed ones from the Notes sheet rule: v_ prefix)."""
    import openpyxl

    wb = openpyxl.load_workbook(path)
    out = {}
    for n in wb.defined_names:
        out[n[2:] if n.startswith("v_") and n[2:] not in wb.defined_names else n] = n
    return out


# ------------------------------------------------------------------ without LibreOffice


def test_plan_has_closed_forms_and_live_choice() -> None:
    model = build_model(["llm_memory"])
    sol = solve_model(
        model,
        ("users",),
        {
            "model": "llama-3.1-70b",
            "gpu": "h100-sxm-80gb",
            "tp": 4,
            "context": "8192 token",
            "overhead": "4 GiB",
            "mem_util": 0.9,
        },
    )
    plan = plan_from_solution(sol, "T1")
    inputs = {i.var.name: i for i in plan.inputs}
    assert inputs["gpu_memory"].preset == "gpu" and inputs["gpu_memory"].value == pytest.approx(79.18)
    assert inputs["attention"].var.choices == ("gqa", "mla") and inputs["attention"].value == "gqa"
    derived = {d.var.name: d for d in plan.derived}
    assert [d.var.name for d in plan.derived][-1] == "users"
    # dp_attention: data-parallel attention ranks each hold their own users (1 unless given)
    assert (
        str(derived["users"].expr) == "dp_attention*floor((kv_tokens - prefix_held)/(effective_context - prefix_held))"
    )
    assert "mla" in str(derived["kv_per_token"].expr)  # if_ on the choice stays live
    gpu = next(p for p in plan.presets if p.key == "gpu")
    assert "h200-sxm-141gb" in gpu.ids and gpu.table["gpu_memory"]["h100-sxm-80gb"] == pytest.approx(79.18)


def test_inverted_equation_exports_the_closed_form() -> None:
    model = build_model(["littles_law"])
    sol = solve_model(model, ("residence_time",), {"arrival_rate": "50 request/s", "in_flight": "1000 request"})
    plan = plan_from_solution(sol, "inverse")
    (d,) = [d for d in plan.derived if d.var.name == "residence_time"]
    assert not d.implicit and str(d.expr) == "in_flight/arrival_rate"


def test_searched_integer_is_a_live_candidate_table() -> None:
    model = build_model(["llm_memory"])
    sol = solve_model(
        model,
        ("tp",),
        {
            "model": "llama-3.1-70b",
            "gpu": "h100-sxm-80gb",
            "users": 100,
            "context": "8192 token",
            "overhead": "4 GiB",
            "mem_util": 0.9,
        },
    )
    plan = plan_from_solution(sol, "search")
    (d,) = [d for d in plan.derived if d.var.name == "tp"]
    assert not d.implicit and d.value == 8 and d.expr is None and d.search is not None
    found = d.search
    assert (found.low, found.high, found.direction, found.skip) == (1, 32, "smallest", True)
    assert {s.name for s in found.test.free_symbols} == {"users", "users_target"}
    assert "users" in found.columns and "kv_pool" in found.columns and "gpu_memory" not in found.columns
    assert [str(c) for c in found.checks] == [
        "Eq(Mod(tp, dp_attention), 0)",
        "Eq(Mod(attention_heads*dp_attention, tp), 0)",  # the attention's TP, tp / dp_attention, divides the heads
    ]
    inputs = {i.var.name: i for i in plan.inputs}
    assert inputs["users_target"].value == 100 and inputs["users_target"].source == "given (target)"
    assert plan.givens_text["users_target"] == "100" and "users" not in plan.givens_text
    order = [x.var.name for x in plan.derived]
    assert order.index("tp") < order.index("weights_per_gpu")  # rows reading tp come after it


def _tp_for_100_users() -> Any:
    given = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "users": 100, "context": "8192 token"}
    return solve_model(build_model(["llm_memory"]), ("tp",), {**given, "overhead": "4 GiB", "mem_util": 0.9})


def test_search_up_to_sets_the_top_of_the_candidate_table() -> None:
    sol = _tp_for_100_users()
    (d,) = [d for d in plan_from_solution(sol, "search", search_up_to=64).derived if d.var.name == "tp"]
    assert d.search is not None and (d.search.low, d.search.high) == (1, 64)
    (d,) = [d for d in plan_from_solution(sol, "search", search_up_to=8).derived if d.var.name == "tp"]
    assert d.search is not None and (d.search.low, d.search.high, d.value) == (1, 8, 8)  # the answer on the edge


@pytest.mark.parametrize(
    ("up_to", "message"),
    [(7, "search_up_to = 7 is below the answer tp = 8"), (1001, "1,001 candidate rows for tp; a table holds at most")],
)
def test_search_up_to_below_the_answer_or_past_the_limit_is_refused(up_to: int, message: str) -> None:
    with pytest.raises(ConcurError, match=message) as caught:
        plan_from_solution(_tp_for_100_users(), "search", search_up_to=up_to)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("bad", ["0", "2.5", "true", "'64'"])
def test_a_definitions_search_up_to_is_a_whole_number(bad: str, tmp_path: Path) -> None:
    path = tmp_path / "book.yaml"
    path.write_text(f"title: t\npacks: [llm_memory]\nfind: [users]\nsearch_up_to: {bad}\n")
    with pytest.raises(ConcurError, match=r"book.yaml:4:\d+: 'search_up_to' must be a whole number"):
        load_definition(path)


def test_continuous_search_stays_implicit_against_a_target_input() -> None:
    model = build_model(["llm_memory"])
    sol = solve_model(
        model,
        ("context",),
        {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "users": 100, "tp": 4, "overhead": "4 GiB", "mem_util": 0.9},
    )
    plan = plan_from_solution(sol, "search")
    (d,) = [d for d in plan.derived if d.var.name == "context"]
    assert d.implicit and d.search is None
    assert d.residual is not None and {s.name for s in d.residual.free_symbols} == {"users", "users_target"}
    assert any(n.startswith("context stays implicit") and "continuous" in n for n in plan.notes)


def test_untaken_branches_and_catalog_choices_come_onto_the_sheet() -> None:
    model = build_model(["llm_memory"])
    sol = solve_model(
        model,
        ("users",),
        {"model": "llama-3.1-70b", "gpu": "h200-sxm-141gb", "tp": 8, "weight_dtype": "fp8", "context": "8192 token"},
    )
    assert "sliding_held" not in sol  # the solver folded the sliding-window branch away
    plan = plan_from_solution(sol, "branches")
    derived = {d.var.name: d for d in plan.derived}
    assert "if_ branch" in derived["sliding_held"].equation and derived["sliding_held"].value == 2064
    assert derived["effective_context"].expr.has(sympy.Piecewise)
    inputs = {i.var.name: i for i in plan.inputs}
    for name in ("attention", "kv_lora_rank", "sliding_window", "sliding_window_layers"):
        assert inputs[name].preset == "model", name
    models = next(p for p in plan.presets if p.key == "model")
    assert models.table["attention"]["deepseek-v3"] == "mla" and models.table["attention"]["llama-3.1-70b"] == "gqa"
    assert models.table["kv_lora_rank"]["deepseek-v3"] == 512 and models.table["kv_lora_rank"]["llama-3.1-70b"] == 0
    assert models.sources["kv_lora_rank"]["llama-3.1-70b"] == "not in the catalog: kv_lora_rank's default"
    assert inputs["context"].preset is None  # typed givens stay typed, even when a catalog has the field


def test_mla_export_keeps_the_gqa_branch_live() -> None:
    model = build_model(["llm_memory"])
    sol = solve_model(
        model,
        ("users",),
        {"model": "deepseek-v3", "gpu": "h200-sxm-141gb", "tp": 8, "weight_dtype": "fp8", "context": "8192 token"},
    )
    assert "kv_heads_per_gpu" not in sol
    plan = plan_from_solution(sol, "mla")
    derived = {d.var.name: d for d in plan.derived}
    assert derived["kv_heads_per_gpu"].value == 16 and "if_ branch" in derived["kv_heads_per_gpu"].equation
    assert "kv_heads_per_gpu" in {s.name for s in derived["kv_per_token"].expr.free_symbols}


def test_export_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        ["export", "llm_memory", "--find", "users", "--set", "tp=abc", "-o", str(tmp_path / "x.xlsx")], capsys
    )
    assert code == 2 and err.count("\n") == 1 and err.startswith("error:")
    code, _, err = run_cli(["export", "llm_memory", "--find", "users"], capsys)
    assert code == 2 and "-o FILE.xlsx" in err
    code, _, err = run_cli(["export", "llm_memory", "--find", "nosuch", "-o", str(tmp_path / "y.xlsx")], capsys)
    assert code == 2 and "unknown variable 'nosuch'" in err
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_export_definition_writes_beside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    definition = tmp_path / "dl.yaml"
    definition.write_text((WORKBOOKS / "data_loader.yaml").read_text())
    code, out, _ = run_cli(["export", str(definition)], capsys)
    assert code == 0 and (tmp_path / "dl.xlsx").is_file() and "dl.xlsx" in out


def test_given_keeps_the_unit_it_was_typed_in() -> None:
    model = build_model(["queueing"])
    sol = solve_model(model, ("p_wait",), {"arrival_rate": "300 request/hour", "service_time": "4 min", "servers": 30})
    plan = plan_from_solution(sol, "call centre")
    inputs = {i.var.name: i for i in plan.inputs}
    assert (inputs["arrival_rate"].value, inputs["arrival_rate"].var.unit) == (300, "request/hour")
    assert (inputs["service_time"].value, inputs["service_time"].var.unit) == (4, "min")
    assert plan.found == ("p_wait",)


def test_exports_are_reproducible_and_readable_by_the_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = os.umask(0o022)
    try:
        a, b = tmp_path / "a.xlsx", tmp_path / "b.xlsx"
        assert run_cli(T1_ARGS + ["-o", str(a)], capsys)[0] == 0
        assert run_cli(T1_ARGS + ["-o", str(b)], capsys)[0] == 0
    finally:
        os.umask(old)
    assert a.read_bytes() == b.read_bytes()
    assert a.stat().st_mode & 0o777 == 0o644
    import zipfile

    with zipfile.ZipFile(a) as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert b"1980-01-01T00:00:00Z" in z.read("docProps/core.xml")


def test_export_into_a_missing_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no" / "such" / "x.xlsx"
    code, _, err = run_cli(T1_ARGS + ["-o", str(target)], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err
    assert not (tmp_path / "no").exists()
    code, _, err = run_cli(["export", str(WORKBOOKS / "rate_limit.yaml"), "-o", str(target)], capsys)
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "no").exists()
