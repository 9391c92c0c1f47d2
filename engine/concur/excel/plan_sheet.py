"""``concur plan --export``: the configurations compared on one sheet a finance reader can take.

One row per candidate, cheapest first, then the rejected ones with their reason. The GPU-hour
price of each row is an **input cell** (the catalog's public list price, blank where there is
none) and the monthly cost and the cost per million tokens are **formulas** over it, the fleet's
GPUs and the hours in a month (an input at the top), so a negotiated price typed over the list
price reprices its row at once. Replicas, latencies and the batch are the plan's answers (values:
changing a price does not change what the traffic needs). Saved like every export: atomically,
byte-identical for the same plan, with the umask's permissions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..extras import need

__all__ = ["export_plan"]

_HEAD = ["GPU", "TP", "weights", "KV cache", "engine", "replicas", "fleet GPUs", "price (usd/GPU-hour)",
         "cost (usd/month)", "cost per million tokens (usd)", "TTFT (ms)", "ITL (ms)", "batch per replica",
         "binds", "feasible", "reason"]


def export_plan(result: Any, path: str | Path) -> Path:
    """Write the comparison workbook for a :class:`concur.analysis.fleet_plan.PlanResult`."""
    need("openpyxl", "writing a workbook")
    from openpyxl import Workbook
    from openpyxl.utils import get_column_letter
    from openpyxl.workbook.defined_name import DefinedName

    from ..analysis.fleet_plan import HOURS_PER_MONTH
    from . import style
    from .cells import put_formula, put_number, put_text, require_folder, save_atomically

    target = require_folder(path)
    wb = Workbook()
    ws = wb.active
    ws.title = "Plan"
    q = result.question
    put_text(ws, 1, 1, "Fleet plan").font = style.TITLE_FONT
    put_text(ws, 2, 1, ", ".join(f"{k} {v}" for k, v in q.items())).font = style.NOTE_FONT
    put_text(ws, 3, 1, "hours per month").font = style.BOLD
    hours = put_number(ws, 3, 2, HOURS_PER_MONTH)
    hours.font, hours.fill = style.INPUT_FONT, style.INPUT_FILL
    wb.defined_names["hours_per_month"] = DefinedName("hours_per_month", attr_text="Plan!$B$3")
    put_text(ws, 3, 3, "yellow cells are inputs: type a negotiated price over a list price").font = style.NOTE_FONT
    head = 5
    for j, text in enumerate(_HEAD, start=1):
        put_text(ws, head, j, text)
    style.style_header(ws, head, 1, len(_HEAD))
    served = result.arrival_rate * result.output_tokens * 3600.0  # output tokens per hour
    row = head
    for c in result.candidates:
        row += 1
        cfg = c.config
        for j, text in enumerate((cfg.gpu, str(cfg.tp), cfg.weight_dtype, cfg.kv_dtype, cfg.engine), start=1):
            put_text(ws, row, j, text)
        if c.feasible:
            put_number(ws, row, 6, c.replicas).number_format = "#,##0"
            put_number(ws, row, 7, c.fleet_gpus).number_format = "#,##0"
            price = ws.cell(row=row, column=8)
            if c.cost_per_month is not None and c.fleet_gpus:
                put_number(ws, row, 8, c.cost_per_month / (c.fleet_gpus * HOURS_PER_MONTH))
            price.number_format = '"$"#,##0.00'
            price.font, price.fill = style.INPUT_FONT, style.INPUT_FILL
            cost = put_formula(ws, row, 9, f'IF(H{row}="","",G{row}*H{row}*hours_per_month)')
            cost.number_format = '"$"#,##0'
            per_m = put_formula(ws, row, 10, f'IF(H{row}="","",G{row}*H{row}/{served!r}*1000000)')
            per_m.number_format = '"$"#,##0.00'
            for col, value in ((11, c.ttft), (12, c.itl)):
                if value is not None:
                    put_number(ws, row, col, value * 1e3).number_format = "#,##0.0"
            if c.batch is not None:
                put_number(ws, row, 13, c.batch).number_format = "#,##0.0"
            put_text(ws, row, 14, c.binds)
        put_text(ws, row, 15, "yes" if c.feasible else "no")
        put_text(ws, row, 16, c.reason).alignment = style.WRAP
    widths = [16, 5, 9, 9, 9, 9, 10, 12, 13, 13, 10, 10, 10, 16, 9, 60]
    for j, w in enumerate(widths, start=1):
        ws.column_dimensions[get_column_letter(j)].width = w
    ws.freeze_panes = ws.cell(row=head + 1, column=1)
    style.page_setup(ws, len(_HEAD), row, title_rows=f"{head}:{head}")
    return save_atomically(wb, target)
