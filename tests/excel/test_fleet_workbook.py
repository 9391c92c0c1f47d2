"""The fleet workbook (``workbooks/llm_fleet.yaml``): replicas live without Goal Seek, and its Plan sheet.

Without LibreOffice: how the export is built (replicas picked from a candidate table whose rows
each solve the fleet's fixed point; the Model sheet's concurrency read from the picked row), the
Python twin of those iterations against the solver over catalog models of every kind, and the
file itself (no long literals, inputs styled as inputs, byte-identical, 0644).

With LibreOffice (one recalculating run and one PDF render, module fixture ``recalculated``):
the export after the edits a planner makes in the sheet -- the arrival rate, the lengths, another
GPU or model in the dropdown (dense, MoE, MoE with sliding windows), the utilization, a tighter
ITL target, a negotiated price -- each compared with ``solve_model`` on the same question, which
is what ``concur solve`` prints; the Plan sheet's row for the same configuration, before and
after a price edit; and the printed pages (no ``###``, no error value). Without soffice or
poppler these tests skip, except under CI=true where they fail.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

openpyxl = pytest.importorskip("openpyxl")

from helpers import require_poppler, require_soffice  # noqa: E402

from concur.errors import ConcurError  # noqa: E402
from concur.excel.definition import export_definition, load_definition  # noqa: E402
from concur.lang.model import build_model  # noqa: E402
from concur.solver.question import solve_model  # noqa: E402

DEFINITION = Path(__file__).resolve().parents[2] / "workbooks" / "llm_fleet.yaml"
ANSWERS = (
    "replicas",
    "fleet_gpus",
    "cost_per_month",
    "cost_per_million_tokens",
    "itl",
    "ttft",
    "per_replica_concurrency",
    "concurrency",
)
INTEGERS = {"replicas", "fleet_gpus", "per_replica_concurrency"}

# name -> (the edit typed into the Inputs sheet, the same edit as a given of the question)
EDITS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "as_exported": ({}, {}),
    "rate_100": ({"arrival_rate": 100}, {"arrival_rate": "100 request/s"}),
    "h200": ({"gpu": "h200-sxm-141gb"}, {"gpu": "h200-sxm-141gb"}),
    "a100_rate_20": (
        {"gpu": "a100-sxm-80gb", "arrival_rate": 20},
        {"gpu": "a100-sxm-80gb", "arrival_rate": "20 request/s"},
    ),
    "mixtral_rate_200": (
        {"model": "mixtral-8x7b", "arrival_rate": 200},
        {"model": "mixtral-8x7b", "arrival_rate": "200 request/s"},
    ),
    "gpt_oss_rate_100": (
        {"model": "gpt-oss-120b", "arrival_rate": 100},
        {"model": "gpt-oss-120b", "arrival_rate": "100 request/s"},
    ),
    "lengths": (
        {"input_tokens": 2000, "output_tokens": 300},
        {"input_tokens": "2000 token/request", "output_tokens": "300 token/request"},
    ),
    "utilization": ({"utilization": 0.5}, {"utilization": 0.5}),
    "itl_30ms": ({"itl_slo_target": 30}, {"itl_slo": "30 ms"}),
    "price": ({"gpu_hour_price": 5.25}, {"gpu_hour_price": "5.25 usd/gpu/hour"}),
    "long_requests": (  # 45 replicas: past the default table of 1..16, within search_up_to: 64
        {"input_tokens": 4000, "output_tokens": 1000},
        {"input_tokens": "4000 token/request", "output_tokens": "1000 token/request"},
    ),
}


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_definition(DEFINITION, tmp_path_factory.mktemp("fleet") / "llm_fleet.xlsx")


def _question(edit: dict[str, Any]) -> Any:
    defn = load_definition(DEFINITION)
    return solve_model(build_model(list(defn.packs)), ANSWERS, {**defn.given, **edit})


# ------------------------------------------------------------------ how it is built


def test_replicas_and_the_loop_inside_are_live_formulas(book: Path) -> None:
    wb = openpyxl.load_workbook(book)
    assert wb.sheetnames[:4] == ["Inputs", "Model", "Search replicas", "Plan"]
    model = {row[0].value: row for row in wb["Model"].iter_rows(min_row=2)}
    replicas, concurrency = model["replicas"][1].value, model["concurrency"][1].value
    assert replicas.startswith("=IF('Search replicas'!$B$3=\"ok\",INDEX('Search replicas'!$A$6:$A$69,MATCH(TRUE,")
    assert "INDEX('Search replicas'!$C$6:$C$69,MATCH(replicas,'Search replicas'!$A$6:$A$69,0))" in concurrency
    assert model["itl"][1].value == "=t_step_served/spec_tokens_per_step" and model["t_step_served"][
        1
    ].value.startswith("=")
    notes = [c.value for row in wb["Notes"].iter_rows() for c in row if isinstance(c.value, str)]
    assert not any("stays implicit" in n or "Rows marked implicit" in n for n in notes)
    assert any(n.startswith("concurrency (for replicas): a loop without a closed form") for n in notes)
    assert not wb.calculation.iterate  # no iterative calculation: the iterates are cells
    search = wb["Search replicas"]
    heads = [c.value for c in search[5] if c.value]
    assert heads[:3] == ["replicas [replica]", "passes", "concurrency [request]"]
    assert "concurrency #12" in heads and "x - g(x) #12" in heads and "concurrency #13" not in heads
    passes = search["B8"].value  # n = 3: the requirement and both SLA targets, one test
    assert "itl_slo_target" in passes and "ttft_slo_target" in passes and "CEILING.MATH" in passes
    assert search.print_area == "'Search replicas'!$A$1:$AK$69"  # the iterations are not printed


def test_inputs_look_like_inputs_and_targets_are_inputs(book: Path) -> None:
    from concur.excel import style

    ws = openpyxl.load_workbook(book)["Inputs"]
    head = next(c.row for c in ws["A"] if c.value == "Name")
    rows = {ws.cell(r, 1).value: ws.cell(r, 2) for r in range(head + 1, ws.max_row + 1) if ws.cell(r, 1).value}
    assert {
        "arrival_rate",
        "input_tokens",
        "utilization",
        "ttft_slo_target",
        "itl_slo_target",
        "gpu_hour_price",
        "hours_per_month",
        "model",
        "gpu",
    } <= set(rows)
    for name, cell in rows.items():
        assert cell.fill.start_color.rgb == style.INPUT_FILL.start_color.rgb, name
        assert cell.font.color.rgb in (style.INPUT_FONT.color.rgb, style.LOOKUP_FONT.color.rgb), name
        assert not cell.protection.locked, name
    assert (rows["itl_slo_target"].value, ws.cell(rows["itl_slo_target"].row, 3).value) == (50, "ms")
    plan = openpyxl.load_workbook(book)["Plan"]
    prices = [plan.cell(r, 8) for r in range(7, plan.max_row + 1) if isinstance(plan.cell(r, 8).value, float)]
    assert len(prices) > 20 and all(p.fill.start_color.rgb == style.INPUT_FILL.start_color.rgb for p in prices)


def test_no_formula_holds_a_long_literal(book: Path) -> None:
    from openpyxl.formula.tokenizer import Tokenizer

    count, longest = 0, (0, "")
    for ws in openpyxl.load_workbook(book).worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if cell.data_type != "f":
                    continue
                count += 1
                for token in Tokenizer(cell.value).items:
                    if token.type == "OPERAND" and token.subtype == "NUMBER":
                        digits = len(token.value.upper().split("E")[0].replace(".", "").strip("0"))
                        longest = max(longest, (digits, f"{ws.title}!{cell.coordinate}: {token.value}"))
    assert count > 2000  # the iterations of every candidate row are formulas too
    assert longest[0] < 16, longest


def test_exports_are_byte_identical_and_readable_by_the_group(book: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        again = export_definition(DEFINITION, tmp_path / "again.xlsx")
    finally:
        os.umask(old)
    assert again.read_bytes() == book.read_bytes()
    assert again.stat().st_mode & 0o777 == 0o644


def _expr_of(rows: dict[str, Any], root: Any, name: str) -> Any:
    """The sheet's formula for ``name``: a body cell's own, or the loop variable's residual."""
    return root.residual if name == root.variable else rows[name].expr


@pytest.mark.parametrize(
    "model", ["llama-3.1-70b", "llama-3.1-8b", "mixtral-8x7b", "qwen3-235b-a22b", "gpt-oss-120b", "deepseek-v3"]
)
def test_each_rows_iterations_reach_the_solvers_fixed_point(model: str) -> None:
    """The Python twin of a candidate row (what the sheet computes) against the solver's own trial at
    that replica count (its bracketed root): the same root, or none where one replica saturates."""
    from concur.excel.from_solution import plan_from_solution
    from concur.excel.live_search import solve_root
    from concur.excel.printer import py_function
    from concur.solver.givens import resolve_givens
    from concur.solver.run import run_question

    defn = load_definition(DEFINITION)
    fleet = build_model(list(defn.packs))
    rows = {d.var.name: d for d in plan_from_solution(_question({}), "t").derived}
    found = rows["replicas"].search
    assert found is not None
    (root,) = found.roots
    funcs = {b: py_function(rows[b].expr) for b in root.body}
    funcs[root.variable] = py_function(root.residual)

    def trial(question: dict[str, Any]) -> dict[str, float]:  # as the solver's search tries a count
        givens = resolve_givens(fleet, question)
        # the loop body's every cell and every cell it reads: the solver skips terms an if_ does not
        # take (the draft's, off; an expert-parallel layout's collectives, ep 1), which the sheet still holds
        read = {str(s) for b in (*root.body, root.variable) for s in _expr_of(rows, root, b).free_symbols} & set(rows)
        wanted = ("concurrency", *sorted((set(root.body) | read) - set(givens.values) - {root.variable}))
        return run_question(fleet, givens.values, wanted, givens.sources, check=False)[1]

    given = {k: v for k, v in defn.given.items() if not k.endswith("_slo")}
    seen = {"solved": 0, "saturated": 0}
    for gpu in ("h100-sxm-80gb", "a100-sxm-80gb", "mi300x"):
        for tp in (2, 8):
            for replicas, rate in itertools.product((1, 2, 5), (5.0, 20.0, 400.0)):
                question = {
                    **given,
                    "model": model,
                    "gpu": gpu,
                    "tp": tp,
                    "arrival_rate": f"{rate} request/s",
                    "replicas": replicas,
                }
                try:
                    values = trial(question)
                except ConcurError as exc:
                    if "cannot keep up" not in exc.message:  # the model does not fit, TP does not divide...
                        continue
                    try:  # one replica saturates; at a trickle the configuration may still not fit
                        values = {**trial({**question, "arrival_rate": "0.001 request/s"}), "arrival_rate": rate}
                    except ConcurError:
                        continue
                    got = solve_root(root, values, funcs)
                    assert got is None or got < 0, (gpu, tp, replicas, got)  # < 0 reads "does not fit"
                    seen["saturated"] += 1
                    continue
                got, want = solve_root(root, values, funcs), values["concurrency"]
                assert got is not None and abs(got - want) <= 1e-9 * want, (gpu, tp, replicas, got, want)
                seen["solved"] += 1
    assert seen["solved"] >= 3 and seen["saturated"] >= 1, seen


# ------------------------------------------------------------------ LibreOffice


@pytest.fixture(scope="module")
def recalculated(book: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_soffice()
    require_poppler()
    from concur.excel.recalc import recalculate_many, set_inputs
    from concur.excel.render import render_pdfs

    tmp = tmp_path_factory.mktemp("fleet_lo")
    jobs = {key: set_inputs(book, edit, tmp / f"{key}.xlsx") for key, (edit, _) in EDITS.items()}
    jobs["hours_700"] = set_inputs(book, {"hours_per_month": 700}, tmp / "hours_700.xlsx")
    jobs["past_the_table"] = set_inputs(
        book, {"input_tokens": 4000, "output_tokens": 1000, "arrival_rate": 200}, tmp / "past.xlsx"
    )
    priced = openpyxl.load_workbook(book)
    plan = priced["Plan"]
    row = _plan_row(plan, ("h100-sxm-80gb", "4", "bf16", "bf16", "default"))
    plan.cell(row, 8).value = 5.0  # a negotiated price typed over the list price
    priced.save(tmp / "plan_price.xlsx")
    jobs["plan_price"] = tmp / "plan_price.xlsx"
    outs = recalculate_many(list(jobs.values()), tmp / "out")
    shutil.copyfile(book, tmp / "printed.xlsx")
    (pdf,) = render_pdfs([tmp / "printed.xlsx"], tmp / "pdf")
    return {"out": dict(zip(jobs, outs)), "pdf": pdf}


def _plan_row(ws: Any, config: tuple[str, ...]) -> int:
    return next(r for r in range(7, ws.max_row + 1) if tuple(ws.cell(r, c).value for c in range(1, 6)) == config)


@pytest.mark.libreoffice
@pytest.mark.parametrize("key", list(EDITS))
def test_an_edit_in_the_sheet_answers_what_concur_solve_answers(key: str, recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names, workbook_errors

    sol = _question(EDITS[key][1])
    got = read_names(recalculated["out"][key], ANSWERS)
    for name in ANSWERS:
        want = sol.value(name)
        if name in INTEGERS:
            assert got[name] == want, f"{key}: {name} sheet {got[name]!r}, concur solve {want!r}"
        else:
            assert abs(got[name] - want) <= 1e-9 * abs(want), f"{key}: {name} sheet {got[name]!r}, solve {want!r}"
    assert workbook_errors(recalculated["out"][key]) == []


@pytest.mark.libreoffice
def test_the_numbers_a_planner_reads(recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names

    def answer(key: str) -> tuple[Any, ...]:
        got = read_names(recalculated["out"][key], ["replicas", "fleet_gpus", "cost_per_month"])
        return got["replicas"], got["fleet_gpus"], round(got["cost_per_month"], 2)

    # the served step (decodes plus the prompts' share) meets the 50 ms ITL target at a modest batch
    assert answer("as_exported") == (9, 36, 180806.4)  # 36 H100 at the $6.88 list price, 730 h
    assert answer("rate_100") == (18, 72, 361612.8)
    assert answer("itl_30ms") == (21, 84, 421881.6)  # a tighter ITL target, more replicas
    assert answer("price")[2] == 36 * 5.25 * 730


@pytest.mark.libreoffice
def test_a_fleet_beyond_the_candidates_says_out_of_range(recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names

    out = recalculated["out"]["past_the_table"]
    edit = {
        "input_tokens": "4000 token/request",
        "output_tokens": "1000 token/request",
        "arrival_rate": "200 request/s",
    }
    assert load_definition(DEFINITION).search_up_to == 64 and _question(edit).value("replicas") > 64
    assert read_names(out, ["replicas", "cost_per_month"]) == {"replicas": "#N/A", "cost_per_month": "#N/A"}
    wb = openpyxl.load_workbook(out, data_only=True)
    assert wb["Search replicas"]["B3"].value == "out of range" and wb["Inputs"]["E5"].value == "out of range"


@pytest.mark.libreoffice
def test_the_plan_sheet_prices_the_same_configuration_alike(recalculated: dict[str, Any]) -> None:
    from concur.excel.recalc import read_names

    def row(key: str) -> tuple[Any, ...]:
        ws = openpyxl.load_workbook(recalculated["out"][key], data_only=True)["Plan"]
        r = _plan_row(ws, ("h100-sxm-80gb", "4", "bf16", "bf16", "default"))
        return tuple(ws.cell(r, c).value for c in (6, 7, 8, 9, 10))

    base = read_names(recalculated["out"]["as_exported"], ["cost_per_month", "cost_per_million_tokens"])
    replicas, gpus, price, month, per_million = row("as_exported")
    assert (replicas, gpus, price) == (9, 36, 6.88)
    assert month == pytest.approx(base["cost_per_month"], rel=1e-12)
    assert per_million == pytest.approx(base["cost_per_million_tokens"], rel=1e-12)
    assert row("plan_price")[3] == pytest.approx(36 * 5.0 * 730, rel=1e-12)
    assert row("hours_700")[3] == pytest.approx(36 * 6.88 * 700, rel=1e-12)  # hours follow the Inputs sheet


@pytest.mark.libreoffice
def test_printed_pages_show_the_answer_and_no_hashes_or_errors(recalculated: dict[str, Any]) -> None:
    import re

    from concur.excel.render import pdf_text, print_problems

    text = pdf_text(recalculated["pdf"])
    assert print_problems(text) == []
    first = text.split("\f")[0]
    assert re.search(r"replicas\s+9\b", first) and re.search(r"fleet_gpus\s+36\b", first)
    assert "$180,806" in first and "$3.44" in first
    assert "Fleet plan: every configuration, cheapest first" in text
