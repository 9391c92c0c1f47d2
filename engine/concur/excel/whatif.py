"""Sweep and Scenario sheets: the same formulas, evaluated at other inputs.

How is this designed, and why?
------------------------------
A sweep answers "what happens to ``users`` as ``tp`` goes 1, 2, 4, 8, 16?"
inside the spreadsheet, live. Each sweep sheet has the swept values in column
A and one formula column per output, then one column per *intermediate*
derived variable that depends on the swept input. Each formula is the
variable's own closed form with the swept input replaced by the row's ``$A``
cell, every dependent derived variable replaced by its column in the same row,
and everything else (other inputs, derived values that do not move) read
through defined names. So changing an input on the Inputs sheet moves the
whole curve, and the native chart drawn over those cells follows.

Why columns and not one inlined formula per output: every ``floor``/``ceil``
repeats its argument twice (once inside ``ROUND``, once inside the ``LOG10``
that picks the digits, see :mod:`concur.excel.printer`), so inlining a chain
of k floors grows as 2**k. The T1 chain (kv_heads_per_gpu, kv_blocks, users)
already gives 2,300-character cells when inlined; with columns each cell is
as short as on the Model sheet, and the intermediate values are visible.

Worked example (T1, sweep over ``tp``): the columns are ``users``,
``kv_per_token`` (outputs), then ``weights_per_gpu``, ``kv_pool``,
``kv_heads_per_gpu``, ``kv_blocks``, ``kv_tokens``. The row with tp = 8 has
``kv_heads_per_gpu`` 1, ``kv_per_token`` 40,960 B/token and ``users`` 162.

Scenarios are side-by-side columns: inputs either follow the Inputs sheet
(``=$C5``) or carry the scenario's override (an unlocked number), and derived
rows are the variable's own formula with names mapped to cells of the *same*
column, so each column reads like the Model sheet.

Consequences: an implicit variable (no closed form) cannot move in a sweep; it
is held at its solved value (its defined name) and the sheet says so.
Non-goals: sweeping a catalog preset id, two-dimensional sweeps.
"""

from __future__ import annotations

import re
from typing import Any

from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.styles import Font, Protection
from openpyxl.utils import get_column_letter

from ..errors import UsageError
from .cells import put_formula, put_number, put_text, unit_format
from .plan import Scenario
from .writer import Layout, display_expr, print_formula

__all__ = ["moving", "write_scenarios", "write_sweeps"]

_BOLD = Font(bold=True)
_ROW = "@@ROW@@"  # cannot occur in a defined name or a printed number
_BAD_SHEET_CHARS = re.compile(r"[\[\]:*?/\\']")


def moving(layout: Layout, over: str) -> list[str]:
    """Derived variables (plan order) whose value changes when input ``over`` changes.

    Implicit variables never move: they hold their solved value.
    """
    moved = {over}
    out = []
    for d in layout.plan.derived:
        if d.implicit or d.expr is None:
            continue
        if any(s.name in moved for s in d.expr.free_symbols):
            moved.add(d.var.name)
            out.append(d.var.name)
    return out


def _needed(layout: Layout, outputs: tuple[str, ...], movers: list[str]) -> list[str]:
    """Outputs first, then the moving intermediates they depend on (plan order)."""
    derived = {d.var.name: d for d in layout.plan.derived}
    mover_set = set(movers)
    need: set[str] = set()
    stack = [o for o in outputs if o in mover_set]
    while stack:
        name = stack.pop()
        if name in need:
            continue
        need.add(name)
        expr = derived[name].expr
        assert expr is not None
        stack.extend(s.name for s in expr.free_symbols if s.name in mover_set)
    return list(outputs) + [m for m in movers if m in need and m not in outputs]


def _sheet_title(wb: Any, wanted: str) -> str:
    base = _BAD_SHEET_CHARS.sub("_", wanted)[:31]
    title, k = base, 2
    existing = {t.lower() for t in wb.sheetnames}
    while title.lower() in existing:
        suffix = f" {k}"
        title = base[: 31 - len(suffix)] + suffix
        k += 1
    return title


def write_sweeps(wb: Any, layout: Layout) -> None:
    """One sheet per :class:`~concur.excel.plan.Sweep`, with a scatter chart."""
    inputs = {inp.var.name for inp in layout.plan.inputs}
    derived = {d.var.name: d for d in layout.plan.derived}
    for sw in layout.plan.sweeps:
        if sw.over not in inputs:
            raise UsageError(f"sweep '{sw.name}' is over '{sw.over}', which is not an input",
                             variable=sw.over, hint="sweep one of the Inputs sheet variables")
        if not sw.values:
            raise UsageError(f"sweep '{sw.name}' has no values", hint="give at least one value")
        missing = [o for o in sw.outputs if o not in derived]
        if missing:
            raise UsageError(f"sweep '{sw.name}' charts {', '.join(missing)}, not derived variables",
                             variable=missing[0], hint="outputs must be Model sheet variables")
        movers = moving(layout, sw.over)
        columns = _needed(layout, sw.outputs, movers)
        col_of = {name: j for j, name in enumerate(columns, start=2)}
        ws = wb.create_sheet(_sheet_title(wb, f"Sweep {sw.name}"))
        over_var = layout.vars[sw.over]
        put_text(ws, 1, 1, f"{sw.over} [{over_var.unit}]" if over_var.unit else sw.over).font = _BOLD
        ws.column_dimensions["A"].width = 22
        names = dict(layout.names)
        names[sw.over] = f"$A{_ROW}"
        names.update({name: f"{get_column_letter(j)}{_ROW}" for name, j in col_of.items()})
        templates: list[tuple[str, str]] = []
        for name, j in col_of.items():
            var, d = layout.vars[name], derived[name]
            label = f"{name} [{var.unit}]" if var.unit else name
            put_text(ws, 1, j, label if name in sw.outputs else f"({label})").font = _BOLD
            ws.column_dimensions[get_column_letter(j)].width = max(16, len(label) + 3)
            if name in col_of and name not in movers:  # an output that does not move
                body = layout.names[name]
            else:
                body = print_formula(layout, display_expr(layout, d), f"sweep '{sw.name}', '{name}'", names)
            templates.append((body, unit_format(var.unit, d.value, var.integer)))
        for i, value in enumerate(sw.values):
            row = i + 2
            put_number(ws, row, 1, value).number_format = unit_format(over_var.unit, value, over_var.integer)
            for j, (body, fmt) in enumerate(templates, start=2):
                put_formula(ws, row, j, body.replace(_ROW, str(row))).number_format = fmt
        note_col = len(columns) + 3
        put_text(ws, 1, note_col, sw.title).font = _BOLD
        put_text(ws, 2, note_col, f"Column A replaces {sw.over}; every other input is read from the "
                                  "Inputs sheet, so the curve follows your edits. Columns in "
                                  "(parentheses) are intermediate values.")
        held = sorted(d.var.name for d in layout.plan.derived if d.implicit)
        if held:
            put_text(ws, 3, note_col, "Held at the solved value (implicit, no closed form): " + ", ".join(held))
        ws.freeze_panes = "B2"
        _chart(ws, sw, len(sw.values), note_col)


def _chart(ws: Any, sw: Any, n: int, note_col: int) -> None:
    chart = ScatterChart()
    chart.title = sw.title
    chart.style = 13
    chart.x_axis.title = sw.x
    chart.y_axis.title = sw.y
    chart.x_axis.delete = False  # openpyxl 3.1 otherwise hides axes in recent Excel
    chart.y_axis.delete = False
    if sw.log_x:
        chart.x_axis.scaling.logBase = 10
    xs = Reference(ws, min_col=1, min_row=2, max_row=n + 1)
    for j in range(len(sw.outputs)):
        ys = Reference(ws, min_col=j + 2, min_row=1, max_row=n + 1)
        series = Series(ys, xs, title_from_data=True)
        series.marker.symbol = "circle"
        series.smooth = False  # straight segments: the values are exact points
        chart.series.append(series)
    chart.width, chart.height = 18, 10
    ws.add_chart(chart, f"{get_column_letter(note_col)}5")


def write_scenarios(wb: Any, layout: Layout) -> None:
    """The Scenarios sheet: one column per :class:`~concur.excel.plan.Scenario`."""
    scenarios = layout.plan.scenarios
    if not scenarios:
        return
    inputs = [inp for inp in layout.plan.inputs if not inp.var.choices]
    input_names = {inp.var.name for inp in layout.plan.inputs}
    for sc in scenarios:
        bad = [k for k in sc.overrides if k not in input_names]
        if bad:
            raise UsageError(f"scenario '{sc.name}' overrides {', '.join(bad)}, which are not inputs",
                             variable=bad[0], hint="override Inputs sheet variables only")
    ws = wb.create_sheet("Scenarios")
    put_text(ws, 1, 1, "Variable").font = _BOLD
    put_text(ws, 1, 2, "Unit").font = _BOLD
    put_text(ws, 1, 3, "Current inputs").font = _BOLD
    put_text(ws, 2, 1, "what changes").font = _BOLD
    put_text(ws, 2, 3, "as on the Inputs sheet")
    ws.column_dimensions["A"].width = 22
    ws.column_dimensions["B"].width = 14
    ws.column_dimensions["C"].width = 18
    rows: dict[str, int] = {}
    row = 3
    for inp in inputs:
        rows[inp.var.name] = row
        row += 1
    for d in layout.plan.derived:
        rows[d.var.name] = row
        row += 1
    column: Scenario | None
    for col, column in enumerate([None, *scenarios], start=3):
        letter = get_column_letter(col)
        if column is not None:
            put_text(ws, 1, col, column.name).font = _BOLD
            put_text(ws, 2, col, column.doc or ", ".join(f"{k}={v:g}" for k, v in column.overrides.items()))
            ws.column_dimensions[letter].width = max(18, len(column.name) + 2)
        cells = {name: f"{letter}{r}" for name, r in rows.items()}
        names = {**layout.names, **cells}
        for inp in inputs:
            var, r = inp.var, rows[inp.var.name]
            fmt = unit_format(var.unit, inp.value, var.integer)
            if column is None:
                cell = put_formula(ws, r, col, layout.names[var.name])
            elif var.name in column.overrides:
                cell = put_number(ws, r, col, column.overrides[var.name])
                cell.protection = Protection(locked=False)
            else:
                cell = put_formula(ws, r, col, f"$C{r}")
            cell.number_format = fmt
        for d in layout.plan.derived:
            var, r = d.var, rows[d.var.name]
            fmt = unit_format(var.unit, d.value, var.integer)
            if column is None or d.implicit:
                cell = put_formula(ws, r, col, layout.names[var.name])
            else:
                body = print_formula(layout, display_expr(layout, d),
                                     f"scenario '{column.name}', '{var.name}'", names)
                cell = put_formula(ws, r, col, body)
            cell.number_format = fmt
    for name, r in rows.items():
        put_text(ws, r, 1, name)
        put_text(ws, r, 2, layout.vars[name].unit)
    ws.freeze_panes = "D3"
