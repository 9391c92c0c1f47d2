"""A workbook's Plan sheet with a prefill-GPU axis: a ``plan:`` entry's ``modes`` and ``prefill_gpus``.

Each test can fail: the disaggregated rows must show their pools, a prefill pool on another GPU type
must have a price input of its own (its list price, or the definition's prefill_gpu_hour_price) and one
on the decode GPU's type a price that follows the decode price; after LibreOffice recalculates, each
row's cost must be what concur plan priced, and typed prices and hours must reprice it as
((fleet GPUs - prefill GPUs) x price + prefill GPUs x prefill price) x hours. A definition without the
axis keeps the Plan sheet of today, cell for cell (the committed fleet workbook), and bad keys get one
line naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

openpyxl = pytest.importorskip("openpyxl")

from helpers import concur_child, one_error_line, require_soffice  # noqa: E402

from concur.errors import UsageError  # noqa: E402
from concur.excel.definition import export_definition, fleet_plan_of, load_definition  # noqa: E402
from concur.excel.plan_sheet import export_plan  # noqa: E402

H100, B200 = "h100-sxm-80gb", "b200"
WORKBOOKS = Path(__file__).resolve().parents[2] / "workbooks"
DEFINITION = """\
title: Disaggregated fleet plan
packs: [llm_disagg]
given:
  model: llama-3.1-70b
  gpu: h100-sxm-80gb
  prefill_gpu: b200
  engine: vllm
  prefill_tp: 4
  tp: 4
  weight_dtype: fp8
  kv_dtype: fp8
  kv_link: ib-ndr-400g
  arrival_rate: 50 request/s
  input_tokens: 1000 token/request
  output_tokens: 400 token/request
  ttft_slo: 2 s
  itl_slo: 50 ms
{extra}find: [prefill_workers, decode_workers, cost_per_month]
plan:
  gpus: [h100-sxm-80gb]
  engines: [vllm]
  tp: [2, 4]
  weight_dtypes: [fp8]
  kv_dtypes: [fp8]
{plan}"""
AXIS = "  modes: [agg, disagg]\n  prefill_gpus: [h100-sxm-80gb, b200]\n"
YELLOW = "00FFF2CC"  # an input cell's fill
# column numbers of the pools layout
MODE, PREFILL_GPU, FLEET, PREFILL, PRICE, PREFILL_PRICE, COST, PER_M = 6, 7, 11, 12, 13, 14, 15, 16


def _definition(tmp: Path, name: str, plan: str = AXIS, extra: str = "") -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(DEFINITION.format(plan=plan, extra=extra))
    return path


def _rows(ws: Any) -> dict[tuple[Any, ...], int]:
    """Row number per (gpu, tp, mode, prefill GPU) of the feasible rows."""
    out = {}
    for r in range(7, ws.max_row + 1):
        if ws.cell(r, 21).value == "yes":
            out[(ws.cell(r, 1).value, ws.cell(r, 2).value, ws.cell(r, MODE).value, ws.cell(r, PREFILL_GPU).value)] = r
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("plan_axis")
    books = {}
    for name, extra in (
        ("axis", ""),
        ("priced", "  gpu_hour_price: 2 usd/gpu/hour\n  prefill_gpu_hour_price: 5 usd/gpu/hour\n"),
    ):
        path = _definition(tmp, name, extra=extra)
        books[name] = export_definition(path, tmp / f"{name}.xlsx")
        books[f"{name}.yaml"] = path
    return books


def test_the_pools_layout_prices_each_pool_at_its_own_gpu(exported: dict[str, Path]) -> None:
    ws = openpyxl.load_workbook(exported["axis"])["Plan"]
    head = [ws.cell(6, c).value for c in range(1, 23)]
    assert head[MODE - 1 : PREFILL_PRICE] == [
        "mode",
        "prefill GPU",
        "prefill TP",
        "prefill workers",
        "replicas (decode workers)",
        "fleet GPUs",
        "prefill GPUs",
        "price (usd/GPU-hour)",
        "prefill price (usd/GPU-hour)",
    ]
    rows = _rows(ws)
    assert {k[2:] for k in rows} == {("agg", None), ("disagg", H100), ("disagg", B200)}
    for (gpu, _tp, mode, prefill), r in rows.items():
        assert gpu == H100 and ws.cell(r, PRICE).value == 6.88  # the decode GPU's list price, an input
        assert ws.cell(r, PRICE).fill.fgColor.rgb == YELLOW
        cell = ws.cell(r, PREFILL_PRICE)
        if prefill == B200:  # another GPU type: an input of its own, at B200's list price
            assert cell.value == 14.2416 and cell.fill.fgColor.rgb == YELLOW
        elif mode == "disagg":  # the decode GPU's type: follows the decode price
            assert cell.value == f"=M{r}" and cell.fill.fgColor.rgb != YELLOW
        else:
            assert cell.value is None
        assert str(ws.cell(r, COST).value).startswith("=IF(") and str(ws.cell(r, PER_M).value).startswith("=IF(")
    notes = [ws.cell(r, 1).value for r in range(7, ws.max_row + 1) if str(ws.cell(r, 1).value).startswith("note: ")]
    assert notes == ["note: disaggregated rows move the KV cache over kv_link = ib-ndr-400g"]


def test_the_definitions_own_prices_price_each_pool(exported: dict[str, Path]) -> None:
    """gpu_hour_price is the decode GPU's (and a same-type prefill pool's), prefill_gpu_hour_price its
    prefill_gpu's: the B200 prefill pools take 5, never 2, never B200's list price."""
    ws = openpyxl.load_workbook(exported["priced"])["Plan"]
    rows = _rows(ws)
    assert {ws.cell(r, PRICE).value for r in rows.values()} == {2.0}
    assert {ws.cell(r, PREFILL_PRICE).value for k, r in rows.items() if k[3] == B200} == {5.0}
    notes = [ws.cell(r, 1).value for r in range(7, ws.max_row + 1) if str(ws.cell(r, 1).value).startswith("note: ")]
    assert any("prefill pools on b200 are priced at the given prefill_gpu_hour_price ($5.00" in n for n in notes)


@pytest.fixture(scope="module")
def recalculated(exported: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_soffice()
    from concur.excel.recalc import recalculate_many, set_inputs

    tmp = tmp_path_factory.mktemp("plan_axis_lo")
    jobs = {
        "as_exported": exported["axis"],
        "hours_700": set_inputs(exported["axis"], {"hours_per_month": 700}, tmp / "hours_700.xlsx"),
    }
    typed = openpyxl.load_workbook(exported["axis"])
    ws = typed["Plan"]
    rows = _rows(ws)
    ws.cell(rows[(H100, "2", "disagg", B200)], PREFILL_PRICE).value = 5.0  # a negotiated B200 price
    ws.cell(rows[(H100, "2", "disagg", H100)], PRICE).value = 3.0  # a negotiated H100 price: both pools
    typed.save(tmp / "typed.xlsx")
    jobs["typed"] = tmp / "typed.xlsx"
    # concur plan --export: the same plan in a workbook of its own, its hours an input of the Plan sheet
    plan = fleet_plan_of(load_definition(exported["axis.yaml"]))
    jobs["plan_export"] = export_plan(plan, tmp / "plan_export.xlsx")
    outs = recalculate_many(list(jobs.values()), tmp / "out")
    return dict(zip(jobs, outs))


def _costs(path: Path) -> dict[tuple[Any, ...], tuple[float, ...]]:
    ws = openpyxl.load_workbook(path, data_only=True)["Plan"]
    cols = (FLEET, PREFILL, PRICE, PREFILL_PRICE, COST, PER_M)
    return {k: tuple(ws.cell(r, c).value or 0.0 for c in cols) for k, r in _rows(ws).items()}


@pytest.mark.libreoffice
def test_the_recalculated_costs_are_the_plans_and_follow_typed_prices_and_hours(
    exported: dict[str, Path], recalculated: dict[str, Path]
) -> None:
    from concur.excel.recalc import workbook_errors

    plan = fleet_plan_of(load_definition(exported["axis.yaml"]))
    assert plan is not None
    want = {
        (
            c.config.gpu,
            str(c.config.tp),
            c.mode,
            (c.config.prefill_gpu or c.config.gpu) if c.mode == "disagg" else None,
        ): c
        for c in plan.feasible
    }
    served = 50 * 400 * 3600
    for key, hours in (("as_exported", 730), ("hours_700", 700), ("typed", 730), ("plan_export", 730)):
        assert workbook_errors(recalculated[key]) == []
        costs = _costs(recalculated[key])
        assert set(costs) == set(want)
        for k, (fleet, prefill, price, prefill_price, cost, per_m) in costs.items():
            assert cost == pytest.approx(((fleet - prefill) * price + prefill * prefill_price) * hours, rel=1e-12)
            assert per_m == pytest.approx(cost / hours / served * 1e6, rel=1e-12)
            if key in ("as_exported", "plan_export"):  # what concur plan priced: each pool at its own GPU's price
                assert cost == pytest.approx(want[k].cost_per_month, rel=1e-9)
    typed = _costs(recalculated["typed"])
    b200 = typed[(H100, "2", "disagg", B200)]
    assert b200[3] == 5.0 and b200[4] == pytest.approx(((b200[0] - b200[1]) * 6.88 + b200[1] * 5.0) * 730)
    same = typed[(H100, "2", "disagg", H100)]
    assert same[2:4] == (3.0, 3.0) and same[4] == pytest.approx(same[0] * 3.0 * 730)  # both pools at 3


def test_a_plan_without_the_axis_keeps_todays_sheet(tmp_path: Path) -> None:
    """The committed fleet workbook (exported before the axis existed) and a disaggregated definition
    whose plan asks no modes: the plain layout, cell for cell."""
    fresh = export_definition(WORKBOOKS / "llm_fleet.yaml", tmp_path / "llm_fleet.xlsx")

    def cells(path: Path) -> dict[str, Any]:
        ws = openpyxl.load_workbook(path)["Plan"]
        return {c.coordinate: c.value for row in ws.iter_rows() for c in row if c.value is not None}

    assert cells(fresh) == cells(WORKBOOKS / "llm_fleet.xlsx")
    plain = export_definition(_definition(tmp_path, "plain", plan=""), tmp_path / "plain.xlsx")
    asked = export_definition(_definition(tmp_path, "agg", plan="  modes: [agg]\n"), tmp_path / "agg.xlsx")
    assert cells(plain) == cells(asked)
    ws = openpyxl.load_workbook(plain)["Plan"]
    assert [ws.cell(6, c).value for c in (6, 8, 16)] == ["replicas", "price (usd/GPU-hour)", "reason"]
    assert ws.max_column == 16


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        ("  modes: [agg, split]\n", "plan.modes: unknown serving mode 'split'"),
        ("  prefill_gpus: [b200]\n", "plan.prefill_gpus: places the prefill pool of disaggregated rows"),
        ("  modes: [disagg]\n  prefill_gpus: [b20]\n", "plan.prefill_gpus: unknown prefill_gpu 'b20'"),
        ("  prefill_gpu: [b200]\n", "plan: unknown key 'prefill_gpu'"),
    ],
)
def test_a_bad_plan_entry_names_the_file_and_the_key(plan: str, words: str, tmp_path: Path) -> None:
    path = _definition(tmp_path, "bad", plan=plan)
    with pytest.raises(UsageError, match="bad.yaml: " + words.replace("(", r"\(")):
        fleet_plan_of(load_definition(path))
    res = concur_child("export", str(path), "-o", str(tmp_path / "bad.xlsx"))
    assert res.returncode == 2 and words in one_error_line(res) and not (tmp_path / "bad.xlsx").exists()
