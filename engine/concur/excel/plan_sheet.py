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

Non-goals: live replicas per row (the Inputs sheet's search is live for its one configuration;
each row here would need its own), sorting again after a price edit.
"""

from __future__ import annotations

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

    q = result.question
    put_text(ws, 1, 1, "Fleet plan: every configuration, cheapest first").font = style.TITLE_FONT
    ws.row_dimensions[1].height = 24
    providers = sorted({c.config.provider for c in result.candidates if c.config.provider})
    priced = f"; prices: {', '.join(providers)}'s on-demand list" if providers else ""
    put_text(ws, 2, 1, ", ".join(f"{k} {v}" for k, v in q.items()) + priced).font = style.NOTE_FONT
    # The two numbers every row's costs read sit in the price column (wide enough), labels to their left.
    put_text(ws, 3, 1, "hours per month").font = style.BOLD
    if hours is None:
        cell = put_number(ws, 3, _VALUE_COL, HOURS_PER_MONTH)
        cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
        wb.defined_names["hours_per_month"] = DefinedName("hours_per_month", attr_text=f"{ws.title}!{_HOURS}")
        note = "an input, like the yellow prices below: type a negotiated price over a list price"
    else:
        cell = put_formula(ws, 3, _VALUE_COL, hours)
        note = "from the Inputs sheet; the yellow prices below are inputs: type a negotiated price over a list price"
    cell.number_format = "#,##0"
    put_text(ws, 3, _VALUE_COL + 1, note).font = style.NOTE_FONT
    served = result.arrival_rate * result.output_tokens * 3600.0  # output tokens per hour
    put_text(ws, 4, 1, "output tokens per hour").font = style.BOLD
    put_number(ws, 4, _VALUE_COL, served).number_format = "#,##0"
    put_text(
        ws,
        4,
        _VALUE_COL + 1,
        "what the question serves (arrival_rate x output_tokens x 3,600 s): every row is sized for it",
    ).font = style.NOTE_FONT
    widths: list[float] = [float(w) for w in _WIDTHS]
    widths[_VALUE_COL - 1] = max(widths[_VALUE_COL - 1], style.fit_width([f"{served:,.0f}"]))
    for j, text in enumerate(_HEAD, start=1):
        put_text(ws, _HEAD_ROW, j, text)
    style.style_header(ws, _HEAD_ROW, 1, len(_HEAD))
    ws.row_dimensions[_HEAD_ROW].height = style.line_height(
        max(style.wrapped_lines(text, width) for text, width in zip(_HEAD, widths))
    )
    month = "hours_per_month" if hours is None else _HOURS
    row = _HEAD_ROW
    for c in result.candidates:
        row += 1
        _write_row(ws, row, c, len(providers) > 1, month)
    for j, w in enumerate(widths, start=1):
        ws.column_dimensions[get_column_letter(j)].width = w
    ws.freeze_panes = ws.cell(row=_HEAD_ROW + 1, column=1)
    style.page_setup(ws, len(_HEAD), row, title_rows=f"{_HEAD_ROW}:{_HEAD_ROW}")


def _write_row(ws: Any, row: int, c: Any, many_providers: bool, month: str) -> None:
    """One candidate's row: its configuration, and where feasible its fleet, the yellow price input and
    the cost formulas that read it; then the verdict and the reason."""
    from . import style

    cfg = c.config
    gpu = f"{cfg.gpu} at {cfg.provider}" if many_providers else cfg.gpu  # --provider all: whose price
    gpu += f" (prefill on {cfg.prefill_gpu})" if getattr(cfg, "prefill_gpu", "") else ""  # --prefill-gpus
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
        for col, value in ((11, c.ttft), (12, c.itl)):
            if value is not None:
                put_number(ws, row, col, value * 1e3).number_format = "#,##0.0"
        if c.batch is not None:
            put_number(ws, row, 13, c.batch).number_format = "#,##0.0"
        put_text(ws, row, 14, c.binds)
    put_text(ws, row, 15, "yes" if c.feasible else "no")
    put_text(ws, row, 16, c.reason).alignment = style.WRAP
    if c.reason:
        ws.row_dimensions[row].height = style.line_height(style.wrapped_lines(c.reason, _WIDTHS[-1]))


_WIDTHS = [16, 5, 9, 9, 9, 9, 10, 12, 13, 13, 10, 10, 10, 16, 9, 60]


def _price(value: float) -> float:
    """A list price recovered from a monthly cost, without the float noise of the division."""
    return float(f"{value:.12g}")
