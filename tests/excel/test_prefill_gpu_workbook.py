"""A disaggregated fleet's workbook with a prefill pool on another GPU type (llm_disagg's prefill_gpu):
the sheet answers what the solver answers, with prefill_gpu given, falling back to gpu, switched in
the sheet's dropdown, and with a typed price that the fallback lends (never the catalog's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openpyxl")

from helpers import T11_DISAGG, require_soffice

from concur.excel.from_solution import plan_from_solution
from concur.excel.writer import write_workbook
from concur.lang.model import build_model
from concur.solver.question import solve_model

pytestmark = pytest.mark.libreoffice

FLEET = {
    **T11_DISAGG,
    "arrival_rate": "50 request/s",
    "input_tokens": "1000 token/request",
    "output_tokens": "400 token/request",
}
FIND = ("prefill_workers", "cost_per_month")
# name -> (givens at export, the edit typed into the sheet, the same question as givens)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "b200": ({**FLEET, "prefill_gpu": "b200"}, {}, {**FLEET, "prefill_gpu": "b200"}),
    "fallback": (FLEET, {}, FLEET),
    "switched": (FLEET, {"prefill_gpu": "b200"}, {**FLEET, "prefill_gpu": "b200"}),
    "typed_price": ({**FLEET, "gpu_hour_price": 2}, {}, {**FLEET, "gpu_hour_price": 2}),
    # prefill_gpu not named: its cell reads gpu's, so another gpu moves both pools, as the solver does
    "gpu_switched": (FLEET, {"gpu": "b200"}, {**FLEET, "gpu": "b200"}),
}


def _solve(given: dict[str, Any]) -> Any:
    return solve_model(build_model(["llm_disagg"]), FIND, given)


@pytest.fixture(scope="module")
def recalculated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_soffice()
    from concur.excel.recalc import recalculate_many, set_inputs

    tmp = tmp_path_factory.mktemp("prefill_gpu")
    jobs: dict[str, Path] = {}
    for key, (given, edit, _) in CASES.items():
        book = write_workbook(plan_from_solution(_solve(given), key), tmp / f"export_{key}.xlsx")
        jobs[key] = set_inputs(book, edit, tmp / f"{key}.xlsx") if edit else book
    outs = recalculate_many(list(jobs.values()), tmp / "out")
    return dict(zip(jobs, outs))


@pytest.mark.parametrize("key", list(CASES))
def test_the_sheet_answers_what_the_solver_answers(key: str, recalculated: dict[str, Path]) -> None:
    from concur.excel.recalc import read_names, workbook_errors

    sol = _solve(CASES[key][2])
    got = read_names(recalculated[key], list(FIND))
    assert got["prefill_workers"] == sol.value("prefill_workers")
    assert got["cost_per_month"] == pytest.approx(sol.value("cost_per_month"), rel=1e-9)
    assert workbook_errors(recalculated[key]) == []


def test_the_cases_differ(recalculated: dict[str, Path]) -> None:
    from concur.excel.recalc import read_names

    cost = {k: read_names(p, ["cost_per_month"])["cost_per_month"] for k, p in recalculated.items()}
    # B200 prefill: 2 workers at 14.2416 usd/GPU-hour; all-H100: 5 at 6.88; a typed 2 usd for every GPU
    assert cost["b200"] == pytest.approx((8 * 14.2416 + 12 * 6.88) * 730, rel=1e-9)
    assert cost["fallback"] == pytest.approx(32 * 6.88 * 730, rel=1e-9)
    assert cost["switched"] == pytest.approx(cost["b200"], rel=1e-12)
    assert cost["typed_price"] == pytest.approx(32 * 2 * 730, rel=1e-9)


def test_an_unnamed_prefill_gpu_follows_gpu_in_the_sheet(recalculated: dict[str, Path]) -> None:
    """Exported without prefill_gpu, the prefill pool's GPU cell is a formula reading gpu's: picking
    B200 for gpu prices and sizes both pools on B200, as solving with gpu=b200 does."""
    import openpyxl

    from concur.excel.recalc import read_names

    inputs = openpyxl.load_workbook(recalculated["fallback"])["Inputs"]
    cells = {row[0].value: row[1].value for row in inputs.iter_rows(min_col=1, max_col=2) if row[0].value}
    assert str(cells["prefill_gpu"]).startswith("=")  # read back as the formula, not a typed id
    named = openpyxl.load_workbook(recalculated["b200"])["Inputs"]
    assert not any(
        str(r[1].value).startswith("=") for r in named.iter_rows(min_col=1, max_col=2) if r[0].value == "prefill_gpu"
    )
    got = read_names(recalculated["gpu_switched"], ["prefill_workers", "cost_per_month"])
    assert got["prefill_workers"] == 2  # B200's FLOP/s, as the b200 case
