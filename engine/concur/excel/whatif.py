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

"Does not fit": the engine refuses a point where a variable leaves its bounds (tp = 1 leaves
no KV pool for Llama-3.1-70B on an H100). A column whose variable has bounds tests its own
value (``IF(kv_pool<0,"does not fit",kv_pool)``) and a column reading one that may fail tests
it with ``ISNUMBER``, so the row says "does not fit" from the first failing variable on, never
"-26 user". The chart does not read those cells (a spreadsheet plots text as 0): it reads
columns right of the printed area holding the value or ``NA()``, which charts leave out as a
gap. The chart sits below the table, inside the print area.

Scenarios are side-by-side columns: inputs either follow the Inputs sheet
(``=$C5``) or carry the scenario's override (an unlocked number), and derived
rows are the variable's own formula with names mapped to cells of the *same*
column, so each column reads like the Model sheet.

Consequences: an implicit variable (no closed form) cannot move in a sweep; it
is held at its solved value (its defined name) and the sheet says so. A searched
whole number (:mod:`concur.excel.search`) is live on the Model sheet but held in
sweeps and scenarios: each would need a candidate table per row or column.
Non-goals: sweeping a catalog preset id, two-dimensional sweeps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from openpyxl.chart import Reference, ScatterChart, Series
from openpyxl.styles import Alignment, Protection
from openpyxl.utils import get_column_letter

from ..errors import UsageError
from . import style
from .cells import put_formula, put_number, put_text
from .layout import Layout, display_expr, print_formula, unit_label
from .plan import Derived, Input, Scenario, SheetVar, Sweep

__all__ = [
    "DOES_NOT_FIT",
    "NO_SOLUTION",
    "ROW",
    "column_templates",
    "moving",
    "sheet_title",
    "table_names",
    "write_scenarios",
    "write_sweeps",
]

_RIGHT = Alignment(horizontal="right")
ROW = "@@ROW@@"  # cannot occur in a defined name or a printed number
_BAD_SHEET_CHARS = re.compile(r"[\[\]:*?/\\']")


def moving(layout: Layout, over: str, solved: tuple[str, ...] = ()) -> list[str]:
    """Derived variables (plan order) whose value changes when input ``over`` changes.

    Implicit variables never move: they hold their solved value; so do rows without a closed
    form, except those in ``solved`` (roots a candidate table solves in each row).
    """
    moved = {over, *solved}
    out = []
    for d in layout.plan.derived:
        if d.var.name in solved:
            out.append(d.var.name)
            continue
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


def sheet_title(wb: Any, wanted: str) -> str:
    base = _BAD_SHEET_CHARS.sub("_", wanted)[:31]
    title, k = base, 2
    existing = {t.lower() for t in wb.sheetnames}
    while title.lower() in existing:
        suffix = f" {k}"
        title = base[: 31 - len(suffix)] + suffix
        k += 1
    return title


DOES_NOT_FIT = "does not fit"
NO_SOLUTION = "no solution"  # a root whose iterations did not settle (the loop has no fixed point there)
_HEAD = 4  # header row of a sweep table; title and notes above it
_CHART_CM = (16.0, 8.5)  # chart width and height
_CHART_UNITS = 88  # column width units covering 16 cm in Excel (0.185 cm per unit)
_CHART_ROWS = 18  # rows of default height covering 8.5 cm


def _bounds_test(var: SheetVar, body: str) -> str | None:
    """``OR(body<lo,body>hi)`` for ``var``'s display-unit bounds (None when unbounded)."""
    tests = []
    lo, hi = var.bounds
    if lo is not None:
        tests.append(f"{body}<{_number(lo)}")
    if hi is not None:
        tests.append(f"{body}>{_number(hi)}")
    if not tests:
        return None
    return tests[0] if len(tests) == 1 else f"OR({','.join(tests)})"


def _number(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    import sympy

    from .printer import excel_formula

    return excel_formula(sympy.Float(value), {})


def write_sweeps(wb: Any, layout: Layout) -> None:
    """One sheet per :class:`~concur.excel.plan.Sweep`, with a scatter chart below the table."""
    inputs = {inp.var.name for inp in layout.plan.inputs}
    derived = {d.var.name: d for d in layout.plan.derived}
    for sw in layout.plan.sweeps:
        if sw.over not in inputs:
            raise UsageError(
                f"sweep '{sw.name}' is over '{sw.over}', which is not an input",
                variable=sw.over,
                hint="sweep one of the Inputs sheet variables",
            )
        if not sw.values:
            raise UsageError(f"sweep '{sw.name}' has no values", hint="give at least one value")
        missing = [o for o in sw.outputs if o not in derived]
        if missing:
            raise UsageError(
                f"sweep '{sw.name}' charts {', '.join(missing)}, not derived variables",
                variable=missing[0],
                hint="outputs must be Model sheet variables",
            )
        _write_sweep(wb, layout, sw, derived)


def table_names(layout: Layout, over: str, columns: list[str], first: int = 2) -> dict[str, str]:
    """How a row of a table reads each name: ``over`` is ``$A<row>``, a column its cell in the same
    row (columns ``first``..), everything else its defined name (the row number is :data:`ROW`)."""
    names = dict(layout.names)
    names[over] = f"$A{ROW}"
    names.update({name: f"{get_column_letter(j)}{ROW}" for j, name in enumerate(columns, start=first)})
    return names


_Templates = tuple[list[tuple[str, str]], set[str], dict[str, str]]


def column_templates(
    layout: Layout,
    over: str,
    columns: list[str],
    where: str,
    first: int = 2,
    roots: dict[str, tuple[str, str]] | None = None,
) -> _Templates:
    """:func:`printed_templates`, through the layout's tape (one entry for all its formulas)."""

    def decode(entry: Any) -> _Templates:
        templates, may_fail, names = entry
        return (
            [(str(t), str(f)) for t, f in templates],
            {str(n) for n in may_fail},
            {str(k): str(v) for k, v in names.items()},
        )

    return layout.tape.run(
        lambda: printed_templates(layout, over, columns, where, first, roots),
        lambda t: [[list(x) for x in t[0]], sorted(t[1]), dict(t[2])],
        decode,
    )


def printed_templates(
    layout: Layout,
    over: str,
    columns: list[str],
    where: str,
    first: int = 2,
    roots: dict[str, tuple[str, str]] | None = None,
) -> _Templates:
    """Row formulas of a table whose column A holds ``over`` and columns ``first``.. hold ``columns``.

    Returns ``(templates, may_fail, names)``: per column its formula body (the row number is
    :data:`ROW`, to be replaced) and number format; the columns that may read "does not fit";
    and the name -> text map the bodies were printed with (:func:`table_names`). A column that
    does not move with ``over`` repeats its defined name. ``roots`` maps a column without a closed
    form to ``(value, solved)``: its value where the condition ``solved`` holds (a candidate
    table's iterations), else :data:`NO_SOLUTION`.
    """
    roots = roots or {}
    derived = {d.var.name: d for d in layout.plan.derived}
    movers = moving(layout, over, tuple(roots))
    col_of = {name: j for j, name in enumerate(columns, start=first)}
    names = table_names(layout, over, columns, first)
    # A column may show "does not fit" when its variable has bounds, or when a column it reads may
    # (decided in plan order, where every column comes after the columns it reads).
    may_fail: set[str] = set(roots)
    for name in movers:
        if name not in col_of or name in roots:
            continue
        expr = derived[name].expr
        assert expr is not None
        reads = {s.name for s in expr.free_symbols}
        if any(b is not None for b in layout.vars[name].bounds) or reads & may_fail:
            may_fail.add(name)
    templates: list[tuple[str, str]] = []
    for name in columns:
        var, d = layout.vars[name], derived[name]
        if name in roots:
            value, solved = roots[name]
            test = _bounds_test(var, value)
            body = f'IF({test},"{DOES_NOT_FIT}",{value})' if test is not None else value
            templates.append((f'IF({solved},{body},"{NO_SOLUTION}")', layout.formats.get(name, "General")))
            continue
        if name not in movers:  # an output that does not move
            templates.append((layout.names[name], layout.formats.get(name, "General")))
            continue
        raw = print_formula(layout, display_expr(layout, d), f"{where}, '{name}'", names)
        body = raw
        test = _bounds_test(var, raw)
        if test is not None:
            body = f'IF({test},"{DOES_NOT_FIT}",{raw})'
        assert d.expr is not None
        deps = sorted({s.name for s in d.expr.free_symbols} & may_fail, key=columns.index)
        if deps:
            checks = [f"ISNUMBER({names[n]})" for n in deps]
            check = checks[0] if len(checks) == 1 else f"AND({','.join(checks)})"
            body = f'IF({check},{body},"{DOES_NOT_FIT}")'
        templates.append((body, layout.formats.get(name, "General")))
    return templates, may_fail, names


def _write_sweep(wb: Any, layout: Layout, sw: Sweep, derived: dict[str, Derived]) -> None:
    """One sweep sheet: the swept values down column A, each needed column's formula across,
    a note, and a chart of the outputs below the table."""
    movers = moving(layout, sw.over)
    columns = _needed(layout, sw.outputs, movers)
    col_of = {name: j for j, name in enumerate(columns, start=2)}
    ws = wb.create_sheet(sheet_title(wb, f"Sweep {sw.name}"))
    over_var = layout.vars[sw.over]
    labels = {sw.over: _label(sw.over, over_var)}
    for name in columns:
        labels[name] = _label(name, layout.vars[name]) if name in sw.outputs else f"({_label(name, layout.vars[name])})"
    templates, may_fail, _ = column_templates(layout, sw.over, columns, f"sweep '{sw.name}'")
    last_col = len(columns) + 1
    title = put_text(ws, 1, 1, sw.title)
    title.font = style.TITLE_FONT
    ws.row_dimensions[1].height = 24
    note = _sweep_note(layout, sw, bool(may_fail & set(sw.outputs)))
    put_text(ws, 2, 1, note).alignment = style.WRAP
    ws.cell(2, 1).font = style.NOTE_FONT
    if last_col > 1:
        ws.merge_cells(start_row=2, start_column=1, end_row=2, end_column=max(2, last_col))
    for j, name in enumerate([sw.over, *columns], start=1):
        put_text(ws, _HEAD, j, labels[name])
    style.style_header(ws, _HEAD, 1, last_col)
    over_fmt = _over_format(over_var, sw.values)
    first = _HEAD + 1
    _sweep_rows(ws, sw.values, templates, over_fmt, first)
    last = first + len(sw.values) - 1
    widths = {
        1: style.fit_width([labels[sw.over]] + [style.shown(v, over_fmt) for v in sw.values], minimum=12, maximum=26)
    }
    for j, name in enumerate(columns, start=2):  # headers wrap; values and "does not fit" fit
        widths[j] = style.fit_width([DOES_NOT_FIT, "-" + "8" * 10] + labels[name].split(), minimum=13, maximum=20)
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width
    _wrap_height_merged(ws, 2, note, sum(widths.values()))
    ws.row_dimensions[_HEAD].height = style.line_height(
        max(style.wrapped_lines(labels[n], widths[j]) for j, n in enumerate([sw.over, *columns], start=1))
    )
    ws.freeze_panes = f"B{first}"
    # The printed area spans the chart too: pad with plain columns up to its width (in Excel's
    # narrower width unit, so it is covered in both programs); the chart's series come after.
    printed = last_col
    while sum(widths.values()) < _CHART_UNITS:
        printed += 1
        widths[printed] = 12.0
        ws.column_dimensions[get_column_letter(printed)].width = 12.0
    if may_fail & set(sw.outputs):
        chart_cols = _chart_data(ws, sw, labels, col_of, first, last, printed + 2)
    else:  # every point is a number: the chart reads the table itself
        chart_cols = [col_of[name] for name in sw.outputs]
    chart_row = last + 2
    _chart(ws, sw, first, last, chart_cols, f"A{chart_row}", labels)
    style.page_setup(ws, printed, chart_row + _CHART_ROWS, title_rows=f"{_HEAD}:{_HEAD}")


def _sweep_note(layout: Layout, sw: Sweep, may_fail: bool) -> str:
    """The sweep sheet's note: what column A replaces, what "does not fit" means when an output
    may fail, and which derived values stay held (implicit ones, searched ones)."""
    note = (
        f"Column A replaces {sw.over}; every other input is read from the Inputs sheet, so the "
        "table and the chart follow your edits. Columns in (parentheses) are intermediate values."
    )
    if may_fail:
        note += (
            f' "{DOES_NOT_FIT}" marks a point concur refuses (a value outside its bounds); '
            "the chart leaves a gap there."
        )
    held = sorted(d.var.name for d in layout.plan.derived if d.implicit)
    if held:
        note += " Held at the solved value (implicit, no closed form): " + ", ".join(held) + "."
    searched = sorted(d.var.name for d in layout.plan.derived if d.search is not None)
    if searched:
        note += (
            " Held at the answer on the Inputs sheet (a search over a candidate table, one per "
            "workbook): " + ", ".join(searched) + "."
        )
    return note


def _over_format(over_var: SheetVar, values: Sequence[float]) -> str:
    """Number format of the swept column: the variable's, or whole numbers with separators for
    a count swept over whole values."""
    over_fmt = style.number_format(over_var, max(values, key=abs), typed=True)
    if all(float(v).is_integer() for v in values) and style.value_kind(over_var) != "fraction":
        over_fmt = "#,##0" if over_var.integer or style.value_kind(over_var) == "count" else over_fmt
    return over_fmt


def _sweep_rows(ws: Any, values: Sequence[float], templates: list[tuple[str, str]], over_fmt: str, first: int) -> None:
    """One row per swept value from row ``first``: the value (an input cell), then each column's
    formula with ``ROW`` replaced by the row's number."""
    for i, value in enumerate(values):
        row = first + i
        cell = put_number(ws, row, 1, value)
        cell.number_format = over_fmt
        cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
        for j, (body, fmt) in enumerate(templates, start=2):
            cell = put_formula(ws, row, j, body.replace(ROW, str(row)))
            cell.number_format = fmt
            cell.alignment = _RIGHT


def _label(name: str, var: SheetVar) -> str:
    unit = unit_label(var)
    return f"{name} [{unit}]" if unit else name


def _wrap_height_merged(ws: Any, row: int, text: str, width: float) -> None:
    ws.row_dimensions[row].height = style.line_height(style.wrapped_lines(text, width))


def _chart_data(
    ws: Any, sw: Sweep, labels: dict[str, str], col_of: dict[str, int], first: int, last: int, start: int
) -> list[int]:
    """Columns the chart reads, right of the printed table: the value, or #N/A (a gap) where it does not fit.

    Spreadsheets plot text as 0 but leave #N/A out, so the table shows "does not fit" while
    the chart shows a gap; these columns sit outside the print area.
    """
    put_text(ws, _HEAD - 1, start, "chart series (#N/A: no point plotted)").font = style.NOTE_FONT
    out = []
    for k, name in enumerate(sw.outputs):
        col = start + k
        src = get_column_letter(col_of[name])
        put_text(ws, _HEAD, col, labels[name]).font = style.NOTE_FONT
        for row in range(first, last + 1):
            cell = put_formula(ws, row, col, f"IF(ISNUMBER({src}{row}),{src}{row},NA())")
            cell.font = style.NOTE_FONT
            cell.number_format = ws.cell(row, col_of[name]).number_format
        ws.column_dimensions[get_column_letter(col)].width = max(14, len(labels[name]) + 2)
        out.append(col)
    return out


def _chart(ws: Any, sw: Sweep, first: int, last: int, cols: list[int], anchor: str, labels: dict[str, str]) -> None:
    chart = ScatterChart()
    chart.title = sw.title
    chart.style = 13
    chart.x_axis.title = sw.x
    chart.y_axis.title = sw.y
    chart.x_axis.delete = False  # openpyxl 3.1 otherwise hides axes in recent Excel
    chart.y_axis.delete = False
    chart.display_blanks = "gap"
    if sw.log_x:
        chart.x_axis.scaling.logBase = 10
    xs = Reference(ws, min_col=1, min_row=first, max_row=last)
    for name, col in zip(sw.outputs, cols):
        ys = Reference(ws, min_col=col, min_row=first, max_row=last)
        series = Series(ys, xs, title=labels[name])
        series.marker.symbol = "circle"
        series.smooth = False  # straight segments: the values are exact points
        chart.series.append(series)
    chart.width, chart.height = _CHART_CM
    ws.add_chart(chart, anchor)


def write_scenarios(wb: Any, layout: Layout) -> None:
    """The Scenarios sheet: one column per :class:`~concur.excel.plan.Scenario`."""
    scenarios = layout.plan.scenarios
    if not scenarios:
        return
    inputs = [inp for inp in layout.plan.inputs if not inp.var.choices]
    _check_overrides(layout, scenarios)
    ws = wb.create_sheet("Scenarios")
    labels = ["Variable", "Unit", "Current inputs", *(sc.name for sc in scenarios)]
    for col, label in enumerate(labels, start=1):
        put_text(ws, 1, col, label)
    style.style_header(ws, 1, 1, len(labels))
    put_text(ws, 2, 1, "what changes").font = style.BOLD
    put_text(ws, 2, 3, "as on the Inputs sheet").alignment = style.WRAP
    names_in_order = [inp.var.name for inp in inputs] + [d.var.name for d in layout.plan.derived]
    rows = {name: 3 + i for i, name in enumerate(names_in_order)}
    texts: dict[int, list[str]] = {}
    column: Scenario | None
    for col, column in enumerate([None, *scenarios], start=3):
        if column is not None:
            what = column.doc or ", ".join(f"{k}={v:g}" for k, v in column.overrides.items())
            put_text(ws, 2, col, what).alignment = style.WRAP
        shown = texts.setdefault(col, [labels[col - 1]])
        shown += _scenario_inputs(ws, layout, inputs, rows, col, column)
        shown += _scenario_derived(ws, layout, rows, col, column)
    for name, r in rows.items():
        put_text(ws, r, 1, name)
        put_text(ws, r, 2, unit_label(layout.vars[name]))
    _size_scenarios(ws, layout, rows, texts, len(scenarios))
    ws.freeze_panes = "D3"
    style.page_setup(ws, len(labels), 2 + len(names_in_order), title_rows="1:1")


def _check_overrides(layout: Layout, scenarios: list[Scenario]) -> None:
    """Every scenario overrides Inputs sheet variables only."""
    input_names = {inp.var.name for inp in layout.plan.inputs}
    for sc in scenarios:
        bad = [k for k in sc.overrides if k not in input_names]
        if bad:
            raise UsageError(
                f"scenario '{sc.name}' overrides {', '.join(bad)}, which are not inputs",
                variable=bad[0],
                hint="override Inputs sheet variables only",
            )


def _scenario_inputs(
    ws: Any, layout: Layout, inputs: list[Input], rows: dict[str, int], col: int, column: Scenario | None
) -> list[str]:
    """The input cells of one column: the Inputs sheet's value (``column`` None), a typed
    override, or the current column's value; returns each cell's text as shown."""
    shown = []
    for inp in inputs:
        var, r = inp.var, rows[inp.var.name]
        fmt = layout.formats.get(var.name, "General")
        if column is None:
            cell = put_formula(ws, r, col, layout.names[var.name])
            value = inp.value
        elif var.name in column.overrides:
            value = column.overrides[var.name]
            cell = put_number(ws, r, col, value)
            cell.protection = Protection(locked=False)
            cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
            fmt = style.number_format(var, value, typed=True)
        else:
            cell = put_formula(ws, r, col, f"$C{r}")
            value = inp.value
        cell.number_format = fmt
        shown.append(style.shown(value, fmt))
    return shown


def _scenario_derived(ws: Any, layout: Layout, rows: dict[str, int], col: int, column: Scenario | None) -> list[str]:
    """The derived cells of one column: formulas over that column's inputs (implicit or
    searched ones held at the Model value); returns each cell's text as shown."""
    cells = {name: f"{get_column_letter(col)}{r}" for name, r in rows.items()}
    names = {**layout.names, **cells}
    shown = []
    for d in layout.plan.derived:
        var, r = d.var, rows[d.var.name]
        if column is None or d.expr is None:  # implicit or searched: held at the Model value
            cell = put_formula(ws, r, col, layout.names[var.name])
        else:
            body = print_formula(layout, display_expr(layout, d), f"scenario '{column.name}', '{var.name}'", names)
            cell = put_formula(ws, r, col, body)
        cell.number_format = layout.formats.get(var.name, "General")
        shown.append(style.shown(d.value, cell.number_format))
    return shown


def _size_scenarios(ws: Any, layout: Layout, rows: dict[str, int], texts: dict[int, list[str]], count: int) -> None:
    """Column widths that fit names, units and shown values; row 2 as tall as its notes wrap."""
    ws.column_dimensions["A"].width = style.fit_width(list(rows) + ["Variable"], minimum=12, maximum=28)
    ws.column_dimensions["B"].width = style.fit_width(
        [unit_label(layout.vars[n]) for n in rows] + ["Unit"], minimum=8, maximum=18
    )
    for col, col_texts in texts.items():
        # numbers of other scenarios can be ten times larger: one spare digit and separator
        ws.column_dimensions[get_column_letter(col)].width = style.fit_width(
            col_texts + ["8" * 12], minimum=14, maximum=24
        )
    lines = max(
        style.wrapped_lines(str(ws.cell(2, c).value or ""), ws.column_dimensions[get_column_letter(c)].width or 14.0)
        for c in range(3, 4 + count)
    )
    ws.row_dimensions[2].height = style.line_height(lines)
