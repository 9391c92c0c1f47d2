"""The fleet plan's configurations compared on one sheet a finance reader can take.

One row per candidate, cheapest first, then the rejected ones with their reason. The GPU-hour
price of each row is an **input cell** (the catalog's public list price, blank where there is
none) and the monthly cost and the cost per million tokens are **formulas** over it, the fleet's
GPUs, the hours in a month and the output tokens the question serves per hour (both at the top),
so a negotiated price typed over the list price reprices its row at once. Replicas, latencies and
the batch are the plan's answers (values: changing a price does not change what the traffic needs).

Two uses:

* ``concur plan --export FILE.xlsx`` (:func:`export_plan`): a workbook of its own, whose hours per
  month is an input cell named ``hours_per_month``; saved like every export (atomically,
  byte-identical for the same plan, with the umask's permissions);
* a ``plan:`` entry of a workbook definition (:func:`concur.excel.definition.fleet_plan_of` runs
  the plan once, :func:`write_plan_sheet` adds the sheet): the fleet workbook's *Plan* sheet, whose
  hours per month follow the Inputs sheet, so both sheets price a month alike.

Either way this module writes a finished :class:`concur.analysis.fleet_plan.FleetPlan`: it never
runs the planner.

Worked example: Llama-3.1-70B at 50 request/s of 1,000 in / 400 out, ITL <= 50 ms: the row
``h100-sxm-80gb 4 bf16 bf16 default`` reads 3 replicas, 12 GPUs, $6.88 (the AWS list price),
$60,269 a month (12 x 6.88 x 730) and $1.15 per million tokens (12 x 6.88 / 72,000,000 x 10^6,
72 million output tokens an hour) -- the Inputs sheet's answer for the same configuration. Type
5.00 over the price and the row reads $43,800.

**Disaggregated rows** (a plan of ``modes`` agg and disagg, ``prefill_gpus`` its prefill-GPU axis:
``concur plan --modes agg,disagg --prefill-gpus ...`` or a ``plan:`` entry's ``modes`` and
``prefill_gpus``) take the *pools* layout: after the engine come the mode, the prefill pool's GPU,
TP and workers, the decode workers (``replicas``), the fleet's GPUs and the prefill pool's GPUs; then
two price inputs, the decode GPU's and the prefill GPU's. A prefill pool on the decode GPU's type
has a prefill price that *follows* the decode price (a formula reading it, as llm_disagg's
``prefill_gpu`` falls back to ``gpu``); one on another GPU type has a yellow input of its own (its
list price at export), so each pool is priced at its own GPU: ``cost = ((fleet GPUs - prefill GPUs)
x price + prefill GPUs x prefill price) x hours``. A plan without disaggregated rows keeps the
layout above, cell for cell; the pools layout ends with the plan's notes on its pools (the KV link it
assumed, what prices a prefill pool on another GPU type).

Non-goals: live replicas per row (the Inputs sheet's search is live for its one configuration;
each row here would need its own), sorting again after a price edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.fleet_plan import HOURS_PER_MONTH
from ..extras import need
from .cells import put_formula, put_number, put_text, require_folder, save_atomically

__all__ = ["export_plan", "write_plan_sheet"]

_HEAD = [
    "GPU",
    "TP",
    "weights",
    "KV cache",
    "engine",
    "replicas",
    "fleet GPUs",
    "price (usd/GPU-hour)",
    "cost (usd/month)",
    "cost per million tokens (usd)",
    "TTFT (ms)",
    "ITL (ms)",
    "batch per replica",
    "binds",
    "feasible",
    "reason",
]
_HEAD_ROW = 6
_VALUE_COL = 8  # the price column: hours per month and tokens per hour sit above it
_HOURS = "$H$3"
_SERVED = "$H$4"
_POOLS_HEAD = [
    *_HEAD[:5],
    "mode",
    "prefill GPU",
    "prefill TP",
    "prefill workers",
    "replicas (decode workers)",
    "fleet GPUs",
    "prefill GPUs",
    "price (usd/GPU-hour)",
    "prefill price (usd/GPU-hour)",
    *_HEAD[8:],
]
_POOLS_VALUE_COL = 13  # the decode price column, hours per month and tokens per hour above it
_POOLS_HOURS = "$M$3"
_POOLS_SERVED = "$M$4"


def export_plan(result: Any, path: str | Path) -> Path:
    """Write the comparison workbook for a :class:`concur.analysis.fleet_plan.FleetPlan`."""
    need("openpyxl", "writing a workbook")
    from openpyxl import Workbook

    target = require_folder(path)
    wb = Workbook()
    ws = wb.active
    ws.title = "Plan"
    write_plan_sheet(wb, ws, result)
    return save_atomically(wb, target)


def write_plan_sheet(wb: Any, ws: Any, result: Any, hours: str | None = None) -> None:
    """Fill ``ws`` with the comparison of ``result`` (a FleetPlan).

    ``hours`` is a formula for the billed hours in a month (the Inputs sheet's ``hours_per_month``
    in a fleet workbook); None makes it an input cell of this sheet, named ``hours_per_month``.
    """
    from openpyxl.utils import get_column_letter
    from openpyxl.workbook.defined_name import DefinedName

    from . import style

    pools = any(c.config.mode == "disagg" for c in result.candidates)
    sheet = _POOLS if pools else _PLAIN
    q = result.question
    put_text(ws, 1, 1, "Fleet plan: every configuration, cheapest first").font = style.TITLE_FONT
    ws.row_dimensions[1].height = 24
    providers = sorted({c.config.provider for c in result.candidates if c.config.provider})
    priced = f"; prices: {', '.join(providers)}'s on-demand list" if providers else ""
    put_text(ws, 2, 1, ", ".join(f"{k} {v}" for k, v in q.items()) + priced).font = style.NOTE_FONT
    # The two numbers every row's costs read sit in the price column (wide enough), labels to their left.
    put_text(ws, 3, 1, "hours per month").font = style.BOLD
    col = sheet.value_col
    if hours is None:
        cell = put_number(ws, 3, col, HOURS_PER_MONTH)
        cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
        wb.defined_names["hours_per_month"] = DefinedName("hours_per_month", attr_text=f"{ws.title}!{sheet.hours}")
        note = "an input, like the yellow prices below: type a negotiated price over a list price"
    else:
        cell = put_formula(ws, 3, col, hours)
        note = "from the Inputs sheet; the yellow prices below are inputs: type a negotiated price over a list price"
    cell.number_format = "#,##0"
    put_text(ws, 3, col + 1, note + sheet.price_note).font = style.NOTE_FONT
    served = result.arrival_rate * result.output_tokens * 3600.0  # output tokens per hour
    put_text(ws, 4, 1, "output tokens per hour").font = style.BOLD
    put_number(ws, 4, col, served).number_format = "#,##0"
    put_text(
        ws,
        4,
        col + 1,
        "what the question serves (arrival_rate x output_tokens x 3,600 s): every row is sized for it",
    ).font = style.NOTE_FONT
    widths: list[float] = [float(w) for w in sheet.widths]
    widths[col - 1] = max(widths[col - 1], style.fit_width([f"{served:,.0f}"]))
    for j, text in enumerate(sheet.head, start=1):
        put_text(ws, _HEAD_ROW, j, text)
    style.style_header(ws, _HEAD_ROW, 1, len(sheet.head))
    ws.row_dimensions[_HEAD_ROW].height = style.line_height(
        max(style.wrapped_lines(text, width) for text, width in zip(sheet.head, widths))
    )
    month = "hours_per_month" if hours is None else sheet.hours
    row = _HEAD_ROW
    for c in result.candidates:
        row += 1
        sheet.write_row(ws, row, c, len(providers) > 1, month)
    if pools:  # the plan's notes on its pools: the KV link assumed, whose price a prefill pool pays
        notes = [n for n in result.notes if "disaggregated" in n or "prefill" in n]
        for j, note in enumerate(notes):
            row += 2 if j == 0 else 1
            put_text(ws, row, 1, f"note: {note}").font = style.NOTE_FONT
    for j, w in enumerate(widths, start=1):
        ws.column_dimensions[get_column_letter(j)].width = w
    ws.freeze_panes = ws.cell(row=_HEAD_ROW + 1, column=1)
    style.page_setup(ws, len(sheet.head), row, title_rows=f"{_HEAD_ROW}:{_HEAD_ROW}")


def _write_row(ws: Any, row: int, c: Any, many_providers: bool, month: str) -> None:
    """One candidate's row: its configuration, and where feasible its fleet, the yellow price input and
    the cost formulas that read it; then the verdict and the reason."""
    from . import style

    cfg = c.config
    gpu = f"{cfg.gpu} at {cfg.provider}" if many_providers else cfg.gpu  # --provider all: whose price
    tp = cfg.layout if cfg.ep > 1 or cfg.dp_attention > 1 else str(cfg.tp)  # an MoE layout: "tp8 ep8 dpa8"
    for j, text in enumerate((gpu, tp, cfg.weight_dtype, cfg.kv_dtype, cfg.engine), start=1):
        put_text(ws, row, j, text)
    if c.feasible:
        put_number(ws, row, 6, c.replicas).number_format = "#,##0"
        put_number(ws, row, 7, c.fleet_gpus).number_format = "#,##0"
        price = ws.cell(row=row, column=8)
        if c.cost_per_month is not None and c.fleet_gpus:
            put_number(ws, row, 8, _price(c.cost_per_month / (c.fleet_gpus * HOURS_PER_MONTH)))
        price.number_format = '"$"#,##0.00'
        price.font, price.fill, price.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
        cost = put_formula(ws, row, 9, f'IF(H{row}="","",G{row}*H{row}*{month})')
        cost.number_format = '"$"#,##0'
        per_m = put_formula(ws, row, 10, f'IF(H{row}="","",G{row}*H{row}/{_SERVED}*1000000)')
        per_m.number_format = '"$"#,##0.00'
        _put_outcome(ws, row, c, 11)
    _put_verdict(ws, row, c, 15, _WIDTHS[-1])


def _put_outcome(ws: Any, row: int, c: Any, col: int) -> None:
    """A feasible row's TTFT and ITL (ms), batch and what binds, from column ``col`` on."""
    for offset, value in enumerate((c.ttft, c.itl)):
        if value is not None:
            put_number(ws, row, col + offset, value * 1e3).number_format = "#,##0.0"
    if c.batch is not None:
        put_number(ws, row, col + 2, c.batch).number_format = "#,##0.0"
    put_text(ws, row, col + 3, c.binds)


def _put_verdict(ws: Any, row: int, c: Any, col: int, width: int) -> None:
    """Whether the row is feasible (column ``col``) and why not (the next, wrapped at ``width``)."""
    from . import style

    put_text(ws, row, col, "yes" if c.feasible else "no")
    put_text(ws, row, col + 1, c.reason).alignment = style.WRAP
    if c.reason:
        ws.row_dimensions[row].height = style.line_height(style.wrapped_lines(c.reason, width))


_WIDTHS = [16, 5, 9, 9, 9, 9, 10, 12, 13, 13, 10, 10, 10, 16, 9, 60]
_POOLS_WIDTHS = [*_WIDTHS[:5], 7, 16, 8, 9, 10, 9, 9, 12, 12, *_WIDTHS[8:]]


def _write_pools_row(ws: Any, row: int, c: Any, many_providers: bool, month: str) -> None:
    """One candidate's row in the pools layout (module essay): the configuration and its pools, and where
    feasible the decode price input, the prefill price (an input of its own on another GPU type, else a
    formula following the decode price) and the cost formulas reading both; then the verdict and reason."""

    cfg, disagg = c.config, c.config.mode == "disagg"
    gpu = f"{cfg.gpu} at {cfg.provider}" if many_providers else cfg.gpu
    tp = cfg.layout if cfg.ep > 1 or cfg.dp_attention > 1 else str(cfg.tp)
    prefill_gpu = (cfg.prefill_gpu or cfg.gpu) if disagg else ""
    for j, text in enumerate((gpu, tp, cfg.weight_dtype, cfg.kv_dtype, cfg.engine, cfg.mode, prefill_gpu), start=1):
        put_text(ws, row, j, text)
    if c.feasible:
        prefill_gpus = (c.prefill_workers or 0) * (c.prefill_tp or 0)
        counts = (
            (c.prefill_tp, c.prefill_workers, c.replicas, c.fleet_gpus, prefill_gpus)
            if disagg
            else (None, None, c.replicas, c.fleet_gpus, None)
        )
        for col, count in enumerate(counts, start=8):
            if count is not None:
                put_number(ws, row, col, count).number_format = "#,##0"
        _pools_prices(ws, row, c, month)
        _put_outcome(ws, row, c, 17)
    _put_verdict(ws, row, c, 21, _POOLS_WIDTHS[-1])


def _pools_prices(ws: Any, row: int, c: Any, month: str) -> None:
    """The price inputs (M: the decode GPU's, N: the prefill GPU's) and the cost formulas (O, P) of a
    feasible row of the pools layout: K fleet GPUs, L of them the prefill pool's."""
    from . import style

    def price_input(col: int, value: float | None) -> None:
        cell = ws.cell(row=row, column=col)
        if value is not None:
            put_number(ws, row, col, _price(value))
        cell.number_format = '"$"#,##0.00'
        cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX

    price_input(13, c.gpu_hour_price)
    if c.config.mode != "disagg":
        per_hour, blank = f"K{row}*M{row}", f'M{row}=""'
    else:
        if c.config.prefill_gpu:  # another GPU type: a price of its own
            price_input(14, c.prefill_gpu_hour_price)
        else:  # the decode GPU's type: its price follows the decode price
            put_formula(ws, row, 14, f"M{row}").number_format = '"$"#,##0.00'
        per_hour, blank = f"((K{row}-L{row})*M{row}+L{row}*N{row})", f'OR(M{row}="",N{row}="")'
    put_formula(ws, row, 15, f'IF({blank},"",{per_hour}*{month})').number_format = '"$"#,##0'
    per_m = put_formula(ws, row, 16, f'IF({blank},"",{per_hour}/{_POOLS_SERVED}*1000000)')
    per_m.number_format = '"$"#,##0.00'


@dataclass(frozen=True)
class _Layout:
    """The columns of one layout of the sheet, where its price column is, and how a row is written."""

    head: list[str]
    widths: list[int]
    value_col: int
    hours: str  # the absolute reference of hours per month (above the price column)
    write_row: Callable[[Any, int, Any, bool, str], None]
    price_note: str = ""


_PLAIN = _Layout(_HEAD, _WIDTHS, _VALUE_COL, _HOURS, _write_row)
_POOLS = _Layout(
    _POOLS_HEAD,
    _POOLS_WIDTHS,
    _POOLS_VALUE_COL,
    _POOLS_HOURS,
    _write_pools_row,
    " (a disaggregated row: price is the decode GPU's; a prefill pool on another GPU type has a prefill price of "
    "its own, else the prefill price follows the decode price)",
)


def _price(value: float) -> float:
    """A list price recovered from a monthly cost, without the float noise of the division."""
    return float(f"{value:.12g}")
