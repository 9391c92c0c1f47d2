"""Write a :class:`~concur.excel.plan.WorkbookPlan` as a live ``.xlsx`` workbook.

How is this designed, and why?
------------------------------
The workbook must keep working after concur is gone: a finance user changes
the GPU price or the context length and every result recalculates, with no
Python and no macros. So every result is a *formula*, printed from the
solver's closed form by :mod:`concur.excel.printer`, over *workbook-scoped
defined names* that equal the variable names (``=FLOOR.MATH(kv_tokens/context)``
reads like the pack; :mod:`concur.excel.names` renames the few names Excel
would misread). And it must read like finance's own sheets before anyone types
into it (:mod:`concur.excel.style` holds the formats, fills and page setup).

Sheets, in order:

* **Inputs** -- first the *summary*: the title, the scenario in one live line
  (``model llama-3.1-70b, tp 4, context 8,192 token/user, ...``, a formula over
  the input cells, so it follows edits) and the answers in large type
  (``replicas 12``, ``cost_per_month $87,600``, each ``=name``); then a legend
  and one row per preset (a dropdown of catalog ids) and per input: name, value
  (unlocked, data-validated, in the input style: yellow fill, blue font typed,
  green font looked up from a catalog), unit, description, a short source.
* **Model** -- every derived variable: live formula, unit, the pack's equation
  text and ``file:line`` beside it, description, and (off the printed area) the
  engine's value for comparison. Implicit blocks hold the solved value plus a
  residual cell that shows about 0 while the value is right (Goal Seek the
  residual to 0 by changing the value after editing inputs). A searched whole
  number (``servers`` for a service level) is instead ``INDEX/MATCH`` over its
  candidate table, with a range check that turns red (also beside the answer on
  Inputs) when the answer leaves the table. Sheet protected without a password:
  a guard against slips.
* **Search** sheets, one per searched whole number (:mod:`concur.excel.search`).
* **Sweep** sheets and **Scenarios** (:mod:`concur.excel.whatif`).
* **Catalogs** -- each preset's table, one row per catalog id, one column per
  variable (numbers, or choice text such as a model's ``attention``);
  preset-driven inputs are ``INDEX/MATCH`` lookups into it on the chosen id, so
  picking another GPU or model changes every dependent cell, and every ``IF`` on
  a looked-up choice; typing a value over one overrides the catalog.
* **Sources** -- the citation of every input and catalog number (long text, on
  its own sheet so the other sheets print in readable type), and **Notes**.

Units: a defined name holds its variable in its *display* unit (the unit the
user typed, else the model's); expressions are in base units. For a derived
variable ``d`` the writer prints ``expr.xreplace({s: scale_s * s}) / scale_d``
with exact rational scales (:func:`concur.excel.printer.exact`), so the factors
cancel symbolically. Worked example (T1): ``kv_pool = gpu_memory*mem_util -
weights_per_gpu - overhead`` with all memories shown in GiB prints as
``gpu_memory*mem_util-overhead-weights_per_gpu`` -- the 2**30 scales cancel --
and ``cost_per_month = cost_per_hour * hours_per_month`` in usd/month, usd/hour
and hour/month prints as ``cost_per_hour*hours_per_month`` (1/3600 x 2/1461 x
2629800 = 1).

Writing is atomic and reproducible (:func:`concur.excel.cells.save_atomically`):
a failure never leaves a half-written file, the file gets the umask's
permissions, and the same plan gives the same bytes. ``fullCalcOnLoad`` makes
Excel recompute on open.

Non-goals: hiding formulas; password protection (sheet protection is a guard,
not security); themes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from openpyxl import Workbook
from openpyxl.styles import Protection
from openpyxl.utils import get_column_letter
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.datavalidation import DataValidation

from ..errors import UsageError
from ..lang.units import unit_info
from . import style
from .cells import clean_text, put_formula, put_number, put_text, require_folder, save_atomically
from .layout import Layout, Tape, display_expr, over_display, print_formula, sheet_ref, unit_label
from .names import mangle_all
from .plan import Derived, Input, SheetVar, WorkbookPlan
from .plan_sheet import write_plan_sheet
from .search import SearchRef, plan_searches, write_searches
from .whatif import sheet_title, write_scenarios, write_sweeps

__all__ = [
    "Layout",
    "build_layout",
    "display_expr",
    "over_display",
    "print_formula",
    "sheet_ref",
    "unit_label",
    "write_workbook",
]

_UNLOCKED = Protection(locked=False)
_IN_RANGE = "in range"  # beside a searched answer whose candidate table holds it
_SCENARIO_LINE_LIMIT = 4000  # characters of the live scenario formula before it falls back to text


def _define(wb: Workbook, layout: Layout, var: str) -> None:
    name = layout.names[var]
    wb.defined_names[name] = DefinedName(name, attr_text=layout.ref(var))


def _header(ws: Any, row: int, labels: list[str]) -> None:
    for col, label in enumerate(labels, start=1):
        put_text(ws, row, col, label)
    style.style_header(ws, row, 1, len(labels))


def _widths(ws: Any, widths: dict[int, float]) -> None:
    for col, width in widths.items():
        ws.column_dimensions[get_column_letter(col)].width = width


def _wrap_height(ws: Any, row: int, texts: dict[int, str], size: float = 11.0) -> None:
    """Row height that shows every wrapped text of ``row`` whole (``texts``: column -> text)."""
    lines = 1
    for col, text in texts.items():
        width = ws.column_dimensions[get_column_letter(col)].width or 9.0
        lines = max(lines, style.wrapped_lines(str(text), width, size))
    if lines > 1 or size > 11:
        ws.row_dimensions[row].height = style.line_height(lines, size)


def _top(ws: Any, row: int, cols: tuple[int, ...]) -> None:
    """Align the short cells of a row with wrapped text to its first line."""
    for col in cols:
        ws.cell(row, col).alignment = style.TOP


def _validation(var: SheetVar) -> DataValidation | None:
    if var.choices:
        listing = ",".join(c.replace('"', "") for c in var.choices)
        return DataValidation(
            type="list",
            formula1=f'"{listing}"',
            allow_blank=False,
            showErrorMessage=True,
            error=f"{var.name} must be one of {listing}",
        )
    kind = "whole" if var.integer else "decimal"
    lo, hi = var.bounds
    if lo is None and hi is None:
        lo = 0
    if lo is not None and hi is not None:
        dv = DataValidation(type=kind, operator="between", formula1=repr(float(lo)), formula2=repr(float(hi)))
        rule = f"between {lo:g} and {hi:g}"
    elif lo is not None:
        dv = DataValidation(type=kind, operator="greaterThanOrEqual", formula1=repr(float(lo)))
        rule = f">= {lo:g}"
    else:
        assert hi is not None
        dv = DataValidation(type=kind, operator="lessThanOrEqual", formula1=repr(float(hi)))
        rule = f"<= {hi:g}"
    dv.showErrorMessage = True
    dv.errorTitle = "concur"
    dv.error = f"{var.name}: a {'whole number' if var.integer else 'number'} {rule} {var.unit}".strip()
    return dv


# ---------------------------------------------------------------- catalogs and sources


def _write_catalogs(wb: Workbook, layout: Layout) -> dict[str, dict[str, str]]:
    """Catalogs sheet (one row per id); returns preset key -> {var -> INDEX/MATCH formula body}.

    Each table's citations sit in columns right of the printed area (``source of gpu_memory``),
    so the Sources sheet can look up the citation of whichever id the dropdown shows;
    ``lookups[key]["source:" + var]`` is that lookup.
    """
    ws = wb.create_sheet("Catalogs")
    lookups: dict[str, dict[str, str]] = {}
    put_text(ws, 1, 1, "Catalog tables: the dropdowns on Inputs look their rows up here").font = style.BOLD
    row = 3
    widths: dict[int, list[str]] = {1: ["id"]}
    tables = [(p, list(p.table)) for p in layout.plan.presets]
    last_col = max([len(v) + 1 for _, v in tables] + [1])
    cite_col = last_col + 2  # citations start here, outside the print area
    for p, variables in tables:
        put_text(ws, row, 1, f"{p.key} (catalog {p.catalog})").font = style.BOLD
        head = row + 1
        put_text(ws, head, 1, "id")
        for j, var in enumerate(variables, start=2):
            unit = unit_label(layout.vars[var]) if var in layout.vars else ""
            label = f"{var} [{unit}]" if unit else var
            put_text(ws, head, j, label)
            widths.setdefault(j, []).append(label)
            put_text(ws, head, cite_col + j - 2, f"source of {var}").font = style.BOLD
        style.style_header(ws, head, 1, len(variables) + 1)
        first, last = head + 1, head + len(p.ids)
        ids_range = f"Catalogs!$A${first}:$A${last}"
        lookups[p.key] = {"__ids__": ids_range}
        key = layout.names.get(p.key, p.key)
        for i, ident in enumerate(p.ids):
            r = first + i
            put_text(ws, r, 1, ident)
            widths[1].append(ident)
            for j, var in enumerate(variables, start=2):
                put_text(ws, r, cite_col + j - 2, p.sources.get(var, {}).get(ident, ""))
                value = p.table[var].get(ident)
                if value is None:  # text, not NA(): picking it turns the formulas that read it to #VALUE!,
                    put_text(ws, r, j, "not listed")  # and the printed table reads as a table
                    widths.setdefault(j, []).append("not listed")
                    continue
                if isinstance(value, str):  # a choice the entry sets (a model's attention: mla)
                    put_text(ws, r, j, value)
                    widths.setdefault(j, []).append(value)
                    continue
                sv = layout.vars.get(var)
                fmt = style.number_format(sv, value, typed=True) if sv is not None else "General"
                put_number(ws, r, j, value).number_format = fmt
                widths.setdefault(j, []).append(style.shown(value, fmt))
        for j, var in enumerate(variables, start=2):
            letter = get_column_letter(j)
            cites = get_column_letter(cite_col + j - 2)
            match = f"MATCH({key},{ids_range},0)"
            lookups[p.key][var] = f"INDEX(Catalogs!${letter}${first}:${letter}${last},{match})"
            lookups[p.key]["source:" + var] = f"INDEX(Catalogs!${cites}${first}:${cites}${last},{match})"
        row = last + 2
    _widths(ws, {c: style.fit_width(t, minimum=12, maximum=30) for c, t in widths.items()})
    ws.column_dimensions["A"].width = max(ws.column_dimensions["A"].width or 0, 18)
    for c in range(cite_col, cite_col + last_col):
        ws.column_dimensions[get_column_letter(c)].width = 40
    style.page_setup(ws, last_col, row, portrait=True)
    return lookups


def _write_sources(wb: Workbook, layout: Layout, lookups: dict[str, dict[str, str]]) -> None:
    """Sources sheet: where every input comes from, in full; a catalog row follows the dropdown."""
    ws = wb.create_sheet("Sources")
    _widths(ws, {1: 24, 2: 86})
    _header(ws, 1, ["Input", "Source"])
    row = 2
    for inp in layout.plan.inputs:
        put_text(ws, row, 1, inp.var.name).alignment = style.TOP
        lookup = lookups.get(inp.preset or "", {}).get("source:" + inp.var.name)
        if lookup is not None:
            key = layout.names.get(inp.preset or "", inp.preset or "")
            cell = put_formula(ws, row, 2, f'{key}&": "&{lookup}')
            text = inp.source
        else:
            text = inp.source or "given"
            cell = put_text(ws, row, 2, text)
        cell.alignment = style.WRAP
        _wrap_height(ws, row, {2: text})
        row += 1
    if layout.plan.presets:
        note = (
            "Every catalog entry's citation is on the Catalogs sheet, right of its table; "
            "the rows above follow the dropdowns on Inputs."
        )
        put_text(ws, row + 1, 1, note).font = style.NOTE_FONT
        ws.merge_cells(start_row=row + 1, start_column=1, end_row=row + 1, end_column=2)
        ws.cell(row + 1, 1).alignment = style.WRAP
        row += 2
    ws.freeze_panes = "A2"
    style.page_setup(ws, 2, row - 1, title_rows="1:1")


# ---------------------------------------------------------------- Inputs with the summary


def _short_source(inp: Input) -> str:
    if inp.preset is not None:
        return "catalog"
    text = inp.source or "given"
    return text if len(text) <= 24 else text[:22].rstrip() + "..."


def _scenario_formula(layout: Layout) -> str | None:
    """A formula spelling out the givens from their live cells: ``"tp "&TEXT(tp,"#,##0")&...``."""
    parts = [f'"{p.key} "&{layout.names[p.key]}' for p in layout.plan.presets]
    keys = {p.key for p in layout.plan.presets}
    for name, typed in layout.plan.givens_text.items():
        if name in keys:
            continue
        label = '"' + name.replace('"', "'") + ' "'
        if name not in layout.cells:
            parts.append('"' + f"{name} {typed}".replace('"', "'") + '"')
            continue
        var = layout.vars.get(name)
        ref = layout.names[name]
        if var is None or var.choices:
            parts.append(f"{label}&{ref}")
            continue
        fmt = layout.formats.get(name, "General")
        unit = var.unit.strip()
        if fmt.startswith("$") and unit.startswith("usd"):
            unit = unit[3:]
        elif fmt.endswith("%"):
            unit = ""
        suffix = ('&"' + (unit if unit.startswith("/") else " " + unit).replace('"', "") + '"') if unit else ""
        parts.append(f'{label}&TEXT({ref},"{fmt}"){suffix}')
    if not parts:
        return None
    text = '&", "&'.join(parts)
    return text if len(text) <= _SCENARIO_LINE_LIMIT else None


def _answers(layout: Layout) -> list[str]:
    plan = layout.plan
    derived = [d.var.name for d in plan.derived]
    found = [n for n in plan.found if n in layout.vars]
    if not found and derived:
        found = [derived[-1]]
    return found


def _write_inputs(wb: Workbook, layout: Layout, lookups: dict[str, dict[str, str]]) -> int:
    """The Inputs sheet below the summary block; returns the first row of the answers."""
    ws = wb["Inputs"]
    plan = layout.plan
    _widths(ws, {1: 22, 2: 16, 3: 14, 4: 36, 5: 16})
    put_text(ws, 1, 1, plan.title).font = style.TITLE_FONT
    ws.row_dimensions[1].height = 24
    ws.merge_cells("A2:E2")
    put_text(ws, 2, 1, "scenario: " + ", ".join(f"{k} {v}" for k, v in plan.givens_text.items()))
    ws.cell(2, 1).font = style.NOTE_FONT
    ws.cell(2, 1).alignment = style.WRAP
    answers = _answers(layout)
    put_text(ws, 4, 1, "Answer").font = style.BOLD
    first_answer = 5
    row = first_answer + len(answers) + 1
    put_text(ws, row, 1, "Legend").font = style.BOLD
    legend = [(2, "typed input", style.INPUT_FONT)]
    if plan.presets:
        legend.append((3, "from catalog", style.LOOKUP_FONT))
    for col, text, font in legend:
        cell = put_text(ws, row, col, text)
        cell.font, cell.fill, cell.border = font, style.INPUT_FILL, style.BOX
    put_text(ws, row, 4, "no fill: a formula (Model sheet)")
    ws.cell(row, 4).font = style.NOTE_FONT
    row += 2
    header_row = row
    _header(ws, row, ["Name", "Value", "Unit", "Description", "Source"])
    row += 1
    value_texts: list[str] = []
    for p in plan.presets:
        put_text(ws, row, 1, p.key).font = style.BOLD
        follows = p.follows in layout.names and p.follows in {q.key for q in plan.presets}
        # a preset standing for another (prefill_gpu for gpu) reads that one's cell until an id is picked
        cell = put_formula(ws, row, 2, layout.names[p.follows]) if follows else put_text(ws, row, 2, p.selected)
        cell.protection = _UNLOCKED
        cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
        value_texts.extend(p.ids)
        what = f"choose a {p.catalog} entry; the green rows follow its choice"
        if follows:
            what = f"{p.follows}'s entry until you choose a {p.catalog} entry here; the green rows follow it"
        put_text(ws, row, 4, what).alignment = style.WRAP
        put_text(ws, row, 5, f"catalog {p.catalog}")
        dv = DataValidation(
            type="list",
            formula1=lookups[p.key]["__ids__"],
            allow_blank=False,
            showErrorMessage=True,
            error=f"pick an id from the {p.catalog} catalog",
        )
        ws.add_data_validation(dv)
        dv.add(cell.coordinate)
        _top(ws, row, (1, 2, 3, 5))
        layout.cells[p.key] = ("Inputs", row, 2)
        _define(wb, layout, p.key)
        row += 1
    for inp in plan.inputs:
        var = inp.var
        put_text(ws, row, 1, var.name)
        fmt = style.number_format(var, inp.value, typed=True)
        font = style.INPUT_FONT
        if var.choices and inp.preset is None:
            cell = put_text(ws, row, 2, inp.value)
            value_texts.extend(var.choices)
        elif inp.preset is not None:
            table = lookups.get(inp.preset, {})
            if var.name not in table:
                raise UsageError(
                    f"input '{var.name}' says preset '{inp.preset}' set it, but that preset has no '{var.name}' column",
                    variable=var.name,
                    hint="add the variable to the PresetChoice table or drop Input.preset",
                )
            cell = put_formula(ws, row, 2, table[var.name])
            font = style.LOOKUP_FONT
            value_texts.extend(var.choices or [style.shown(inp.value, fmt)])
        else:
            cell = put_number(ws, row, 2, inp.value)
            value_texts.append(style.shown(inp.value, fmt))
        cell.protection = _UNLOCKED
        cell.font, cell.fill, cell.border = font, style.INPUT_FILL, style.BOX
        cell.number_format = fmt
        layout.formats[var.name] = fmt
        dv = _validation(var)
        if dv is not None:
            ws.add_data_validation(dv)
            dv.add(cell.coordinate)
        put_text(ws, row, 3, unit_label(var))
        put_text(ws, row, 4, var.doc).alignment = style.WRAP
        put_text(ws, row, 5, _short_source(inp))
        _wrap_height(ws, row, {4: var.doc})
        _top(ws, row, (1, 2, 3, 5))
        layout.cells[var.name] = ("Inputs", row, 2)
        _define(wb, layout, var.name)
        row += 1
    units = [unit_label(i.var) for i in plan.inputs] + [unit_label(layout.vars[a]) for a in answers]
    _widths(
        ws,
        {
            1: style.fit_width(
                [p.key for p in plan.presets] + [i.var.name for i in plan.inputs] + answers, minimum=14, maximum=30
            ),
            2: style.fit_width(value_texts + ["typed input"], minimum=12, maximum=24),
            3: style.fit_width(units + ["Unit", "from catalog" if plan.presets else ""], minimum=8, maximum=20),
            5: style.fit_width(
                [_short_source(i) for i in plan.inputs]
                + ["Source"]
                + (["out of range"] if any(d.search for d in plan.derived) else []),
                minimum=10,
                maximum=26,
            ),
        },
    )
    for r in range(header_row + 1, row):  # heights again now that the widths are final
        text = ws.cell(r, 4).value
        if isinstance(text, str):
            _wrap_height(ws, r, {4: text})
    ws.protection.sheet = True
    layout.inputs_rows = (first_answer, header_row, row - 1)
    return first_answer


def _write_summary(ws: Any, layout: Layout, first_row: int) -> None:
    """The answers in large type (live ``=name`` cells) and the live scenario line."""
    line = _scenario_formula(layout)
    if line is not None:
        put_formula(ws, 2, 1, line)
        ws.cell(2, 1).font = style.NOTE_FONT
        ws.cell(2, 1).alignment = style.WRAP
    keys = {p.key for p in layout.plan.presets}
    text = (
        ", ".join(
            [f"{p.key} {p.selected}" for p in layout.plan.presets]
            + [f"{k} {v}" for k, v in layout.plan.givens_text.items() if k not in keys]
        )
        + " " * 12
    )
    width = sum(ws.column_dimensions[get_column_letter(c)].width or 9.0 for c in range(1, 6))
    ws.row_dimensions[2].height = style.line_height(style.wrapped_lines(text, width))
    for i, name in enumerate(_answers(layout)):
        r = first_row + i
        var = layout.vars[name]
        put_text(ws, r, 1, name).font = style.BOLD
        cell = put_formula(ws, r, 2, layout.names[name])
        cell.font, cell.fill, cell.border = style.BIG_FONT, style.RESULT_FILL, style.BOX
        cell.number_format = layout.formats.get(name, "General")
        put_text(ws, r, 3, unit_label(var))
        put_text(ws, r, 4, var.doc)
        if name in layout.checks:  # a searched answer: is it inside its candidate table?
            check = layout.checks[name]
            put_formula(ws, r, 5, f'IF({check}="ok","{_IN_RANGE}",{check})')
            style.alert_unless_ok(ws, f"E{r}", _IN_RANGE)
        for col in (1, 2, 3, 4, 5):
            ws.cell(r, col).alignment = style.MIDDLE_WRAP if col == 4 else style.MIDDLE
        ws.row_dimensions[r].height = max(26.0, ws.row_dimensions[r].height or 0)
    answers = [style.shown(_value_of(layout, n), layout.formats.get(n, "General")) for n in _answers(layout)]
    width = max(ws.column_dimensions["B"].width or 9.0, style.fit_width(answers, size=16, maximum=40))
    ws.column_dimensions["B"].width = width
    _, header_row, last_row = layout.inputs_rows
    style.page_setup(ws, 5, last_row, title_rows=f"{header_row}:{header_row}")


def _value_of(layout: Layout, name: str) -> Any:
    for d in layout.plan.derived:
        if d.var.name == name:
            return d.value
    return next((i.value for i in layout.plan.inputs if i.var.name == name), None)


# ---------------------------------------------------------------- Model


def _write_model(wb: Workbook, layout: Layout, searches: dict[str, SearchRef]) -> None:
    ws = wb["Model"]
    plan = layout.plan
    implicit = any(d.implicit for d in plan.derived)
    labels = ["Name", "Value", "Unit", "Equation", "Source", "Description", "Engine value"]
    if implicit or searches:
        check = {(True, False): "Residual (should be ~0)", (False, True): "Check"}.get(
            (implicit, bool(searches)), "Residual (~0) or check"
        )
        labels += [check, "Note"]
    _header(ws, 1, labels)
    value_texts: list[str] = ["Value"]
    solved = {root: (ref, formula) for ref in searches.values() for root, formula in ref.solved.items()}
    for row, d in enumerate(plan.derived, start=2):
        var = d.var
        layout.cells[var.name] = ("Model", row, 2)
        put_text(ws, row, 1, var.name)
        fmt = style.number_format(var, d.value)
        layout.formats[var.name] = fmt
        if d.implicit:
            cell = put_number(ws, row, 2, d.value)
            cell.protection = _UNLOCKED
            cell.font, cell.fill, cell.border = style.INPUT_FONT, style.INPUT_FILL, style.BOX
        elif var.name in searches:
            ref = searches[var.name]
            cell = put_formula(ws, row, 2, ref.answer)
            put_formula(ws, row, 8, ref.check)
            style.alert_unless_ok(ws, f"H{row}")
            put_text(ws, row, 9, ref.note).alignment = style.WRAP
            layout.checks[var.name] = ref.check
        elif var.name in solved:
            ref, formula = solved[var.name]
            cell = put_formula(ws, row, 2, formula)
            put_formula(ws, row, 8, ref.check)
            style.alert_unless_ok(ws, f"H{row}")
            put_text(ws, row, 9, _solved_note(d, ref)).alignment = style.WRAP
        else:
            if d.expr is None:
                raise UsageError(
                    f"derived variable '{var.name}' ({d.where}) has no expression and is not marked implicit",
                    variable=var.name,
                    hint="give Derived.expr, or implicit=True with a residual",
                )
            cell = put_formula(ws, row, 2, print_formula(layout, display_expr(layout, d), d.where))
        cell.number_format = fmt
        value_texts.append(style.shown(d.value, fmt))
        put_text(ws, row, 3, unit_label(var))
        put_text(ws, row, 4, d.equation).alignment = style.WRAP
        put_text(ws, row, 5, d.where).alignment = style.WRAP
        put_text(ws, row, 6, var.doc).alignment = style.WRAP
        put_number(ws, row, 7, d.value).number_format = fmt
        # Defined before the residual is printed, which may refer to the name.
        _define(wb, layout, var.name)
        if d.implicit:
            if d.residual is not None:
                res = display_expr(layout, d, d.residual, out_scale=1)  # base units
                put_formula(ws, row, 8, print_formula(layout, res, d.where))
            put_text(
                ws,
                row,
                9,
                f"implicit: after changing inputs, use Data > What-If > Goal Seek: "
                f"set H{row} to 0 by changing B{row} (or re-run concur export)",
            )
            ws.cell(row, 9).alignment = style.WRAP
    names = [d.var.name for d in plan.derived]
    _widths(
        ws,
        {
            1: style.fit_width(names + ["Name"], minimum=12, maximum=26),
            2: style.fit_width(value_texts, minimum=12, maximum=20),
            3: style.fit_width([unit_label(d.var) for d in plan.derived] + ["Unit"], minimum=8, maximum=16),
            4: 30,
            5: 24,
            6: 24,
            7: style.fit_width(value_texts + ["Engine value"], minimum=12, maximum=22),
            8: 22,
            9: 50,
        },
    )
    for row, d in enumerate(plan.derived, start=2):
        texts = {4: d.equation, 5: d.where, 6: d.var.doc}
        if d.var.name in searches:
            texts[9] = searches[d.var.name].note
        elif d.var.name in solved:
            texts[9] = _solved_note(d, solved[d.var.name][0])
        _wrap_height(ws, row, texts)
        _top(ws, row, (1, 2, 3, 7))
    ws.freeze_panes = "C2"
    ws.protection.sheet = True
    style.page_setup(ws, 6, len(plan.derived) + 1, title_rows="1:1")


def _solved_note(d: Derived, ref: SearchRef) -> str:
    return (
        f"live: no closed form; solved in every candidate row of sheet '{ref.title}' and read from the row "
        f"of the answer there ({d.solved_in})"
    )


# ---------------------------------------------------------------- Notes


def _write_notes(wb: Workbook, layout: Layout) -> None:
    ws = wb.create_sheet("Notes")
    _widths(ws, {1: 28, 2: 96})
    plan = layout.plan
    lines: list[tuple[str, str]] = [("Title", plan.title), ("About", plan.doc), ("", "")]
    lines.append(
        (
            "How to use",
            (
                "Change the yellow cells on the Inputs sheet (or pick another id in "
                "a preset dropdown); every formula on Model, the sweeps and Scenarios "
                "recalculates, and so do the answers at the top of Inputs."
            ),
        )
    )
    lines.append(
        (
            "",
            (
                "Blue numbers were typed, green ones are looked up on the Catalogs sheet (type "
                "over one to override the catalog); cells without fill are formulas."
            ),
        )
    )
    lines.append(
        (
            "",
            (
                "Model is protected without a password to prevent accidental edits: "
                "Review > Unprotect Sheet if you must."
            ),
        )
    )
    if any(d.implicit for d in plan.derived):
        lines.append(("", "Rows marked implicit hold a solved value: Goal Seek its residual cell to 0."))
    searched = [d.var.name for d in plan.derived if d.search is not None]
    if searched:
        lines.append(
            (
                "",
                (
                    f"{', '.join(searched)}: picked live from a table of candidates on its 'Search' sheet "
                    "(the first one meeting the target); a red 'out of range' means the answer left "
                    "the table: export again."
                ),
            )
        )
    solved = [f"{d.var.name} (for {d.solved_in})" for d in plan.derived if d.solved_in is not None]
    if solved:
        lines.append(
            (
                "",
                (
                    f"{', '.join(solved)}: a loop without a closed form, solved in every candidate row of "
                    "the Search sheet by iterations written out right of its printed table (no iterative "
                    "calculation, no Goal Seek); the Model sheet reads it from the row of the answer."
                ),
            )
        )
    if plan.comparison is not None:
        lines.append(
            (
                "",
                (
                    "Plan: every configuration of the fleet plan for this model and traffic, cheapest "
                    "first, as concur plan sized it when the workbook was exported; its yellow prices "
                    "are inputs, its replicas and latencies are not live."
                ),
            )
        )
    lines.append(("", "Where each number comes from: the Sources sheet."))
    if plan.givens_text:
        lines.append(("", ""))
        lines.append(("Givens", "as typed when the workbook was exported"))
        lines.extend((k, v) for k, v in plan.givens_text.items())
    if plan.notes:
        lines.append(("", ""))
        lines.extend(("Note", n) for n in plan.notes)
    renamed = [(v, n) for v, n in layout.names.items() if v != n]
    if renamed:
        lines.append(("", ""))
        lines.append(("Renamed names", "Excel would misread these variable names; the workbook uses:"))
        lines.extend((v, n) for v, n in renamed)
    for row, (a, b) in enumerate(lines, start=1):
        if a:
            put_text(ws, row, 1, a).font = style.BOLD
            ws.cell(row, 1).alignment = style.TOP
        if b:
            put_text(ws, row, 2, b).alignment = style.WRAP
            _wrap_height(ws, row, {2: b})
    style.page_setup(ws, 2, len(lines))


def _hours(layout: Layout) -> str | None:
    """The billed hours in a month as a formula over the Inputs sheet (None: the workbook has none)."""
    name = "hours_per_month"
    if name not in layout.vars:
        return None

    def hours() -> Any:
        import sympy

        from .printer import exact

        return sympy.Symbol(name) * layout.scales[name] / exact(unit_info("hour/month").factor)

    return print_formula(layout, hours, f"the Plan sheet's '{name}'")


# ---------------------------------------------------------------- the workbook


def build_layout(plan: WorkbookPlan, tape: Tape | None = None) -> Layout:
    """Names and scales for every plan variable (no scales while ``tape`` replays); checks names
    are unique."""
    layout = Layout(plan=plan, tape=tape or Tape())
    order: list[str] = [p.key for p in plan.presets]
    for inp in plan.inputs:
        order.append(inp.var.name)
    for d in plan.derived:
        order.append(d.var.name)
    seen: set[str] = set()
    for name in order:
        if name in seen:
            raise UsageError(
                f"variable '{name}' appears twice in the workbook plan",
                variable=name,
                hint="each input, preset key and derived variable needs its own name",
            )
        seen.add(name)
    layout.names = mangle_all(order)
    layout.vars = plan.variables()
    if not layout.replaying:
        from .printer import exact

        layout.scales = {name: exact(var.scale) for name, var in layout.vars.items()}
    return layout


def write_workbook(plan: WorkbookPlan, path: str | os.PathLike[str], tape: Tape | None = None) -> Path:
    """Write ``plan`` as a live xlsx workbook at ``path`` (atomically) and return the path.
    ``tape`` (:class:`concur.excel.layout.Tape`) records what sympy printed, or replays it.

    Raises :class:`concur.errors.UsageError` for an inconsistent plan (unknown
    symbol, duplicate name, unprintable expression) or a folder that does not
    exist; on any error the target file is left as it was. The example is not run as a doctest:
    it would write kv.xlsx into the working folder (a plan to write is made in
    :func:`concur.excel.from_solution.plan_from_solution`'s example).

        >>> write_workbook(plan, "kv.xlsx")  # doctest: +SKIP
        PosixPath('kv.xlsx')
    """
    target = require_folder(path)  # before the work, not after it
    layout = build_layout(plan, tape)
    wb = Workbook()
    wb.active.title = "Inputs"
    lookups = _write_catalogs(wb, layout)
    first_answer = _write_inputs(wb, layout, lookups)
    wb.create_sheet("Model")  # before the search sheets, which it reads
    searches = plan_searches(wb, layout)
    _write_model(wb, layout, searches)
    _write_summary(wb["Inputs"], layout, first_answer)
    tables = write_searches(wb, layout, searches)
    write_sweeps(wb, layout)
    write_scenarios(wb, layout)
    if plan.comparison is not None:
        write_plan_sheet(wb, wb.create_sheet(sheet_title(wb, "Plan")), plan.comparison, _hours(layout))
    catalogs = wb["Catalogs"]
    if plan.presets:
        wb.move_sheet(catalogs, offset=len(wb.sheetnames) - 1 - wb.sheetnames.index("Catalogs"))
    else:
        wb.remove(catalogs)
    _write_sources(wb, layout, lookups)
    _write_notes(wb, layout)
    wb.active = 0
    wb.properties.title = clean_text(plan.title)  # raw, a control character made docProps/core.xml unreadable
    wb.properties.creator = "concur"
    wb.calculation.fullCalcOnLoad = True
    layout.tape.finished()
    return save_atomically(wb, target, tables)
