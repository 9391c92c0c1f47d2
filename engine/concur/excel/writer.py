"""Write a :class:`~concur.excel.plan.WorkbookPlan` as a live ``.xlsx`` workbook.

How is this designed, and why?
------------------------------
The workbook must keep working after concur is gone: a finance user changes
the GPU price or the context length and every result recalculates, with no
Python and no macros. So every result is a *formula*, printed from the
solver's closed form by :mod:`concur.excel.printer`, over *workbook-scoped
defined names* that equal the variable names (``=FLOOR.MATH(kv_tokens/context)``
reads like the pack; :mod:`concur.excel.names` renames the few names Excel
would misread).

Sheets, in order:

* **Inputs** -- one row per preset (a dropdown of catalog ids) and per input:
  name, value (unlocked, data-validated, number format showing the unit),
  unit, description, source. Preset-driven inputs are ``INDEX/MATCH`` lookups
  into Catalogs on the chosen id, so picking another GPU changes every
  dependent cell; typing a number over one overrides the catalog.
* **Catalogs** -- each preset's table (variables x ids) and the citations.
* **Model** -- every derived variable: live formula, unit, the engine's value
  for comparison, description, equation text, ``file:line``. Implicit blocks
  hold the solved value plus a residual cell that shows about 0 while the value
  is right (Goal Seek the residual to 0 by changing the value after editing
  inputs). Sheet protected without a password: a guard against slips.
* **Sweep** sheets and **Scenarios** (:mod:`concur.excel.whatif`), **Notes**.

Units: a defined name holds its variable in *display* units; expressions are
in base units. For a derived variable ``d`` the writer prints
``expr.xreplace({s: scale_s * s}) / scale_d`` with exact rational scales, so
the factors cancel symbolically where they can. Worked example (T1):
``kv_pool = gpu_memory*mem_util - weights_per_gpu - overhead`` with all three
memories shown in GiB (scale 2**30) prints as
``gpu_memory*mem_util-overhead-weights_per_gpu`` -- the scales cancel -- and the
cell shows 34.41 GiB for Llama-3.1-70B TP4 on an H100.

Writing is atomic: the workbook is saved to a temporary file in the target
directory and moved into place with :func:`os.replace`, so a failure never
leaves a half-written file. ``fullCalcOnLoad`` makes Excel recompute on open.

Non-goals: styling beyond widths, formats and frozen headers; hiding formulas;
password protection (sheet protection is a guard, not security).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy
from openpyxl import Workbook
from openpyxl.styles import Font, Protection
from openpyxl.utils import get_column_letter, quote_sheetname
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.worksheet.datavalidation import DataValidation

from ..errors import UsageError
from .cells import put_formula, put_number, put_text, save_atomically, unit_format
from .names import mangle_all
from .plan import Derived, SheetVar, WorkbookPlan
from .printer import excel_formula

__all__ = ["Layout", "build_layout", "display_expr", "print_formula", "write_workbook"]

_BOLD = Font(bold=True)
_UNLOCKED = Protection(locked=False)


@dataclass
class Layout:
    """Where each variable lives: defined names, cells, scales (filled while writing)."""

    plan: WorkbookPlan
    names: dict[str, str] = field(default_factory=dict)  # variable -> defined name
    cells: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # var -> (sheet, row, col)
    scales: dict[str, sympy.Rational] = field(default_factory=dict)
    vars: dict[str, SheetVar] = field(default_factory=dict)
    inlined: dict[str, sympy.Expr] = field(default_factory=dict)  # derived -> display expr over inputs

    def ref(self, name: str, absolute: bool = True) -> str:
        """``Sheet!$B$3`` for variable ``name``."""
        sheet, row, col = self.cells[name]
        letter = get_column_letter(col)
        cell = f"${letter}${row}" if absolute else f"{letter}{row}"
        return f"{sheet_ref(sheet)}!{cell}"


def sheet_ref(title: str) -> str:
    """Sheet name as written in a reference: bare when a plain identifier, else quoted.

    Bare names keep the workbook readable by the Python evaluators that trip on
    quoted sheet names in defined names.
    """
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", title):
        return title
    return quote_sheetname(title)


def _exact(scale: float) -> sympy.Rational:
    """Exact rational of the shortest decimal of ``scale`` (2**30 stays an integer)."""
    return sympy.Rational(repr(float(scale)))


def display_expr(layout: Layout, d: Derived, expr: sympy.Expr | None = None,
                 out_scale: sympy.Rational | None = None) -> sympy.Expr:
    """``expr`` (default ``d.expr``) over display-unit symbols, divided by ``out_scale``.

    ``out_scale`` defaults to ``d``'s scale, so the result is in ``d``'s display unit;
    pass 1 to keep base units (residuals).
    """
    expr = d.expr if expr is None else expr
    assert expr is not None, "a derived row always has a closed form or a residual"
    subs = {}
    for s in expr.free_symbols:
        if s.name not in layout.scales:
            raise UsageError(
                f"derived variable '{d.var.name}' ({d.where}) refers to '{s.name}', "
                "which is neither an input nor an earlier derived variable",
                variable=d.var.name,
                hint="order plan.derived topologically and list every input",
            )
        if layout.scales[s.name] != 1:
            subs[s] = layout.scales[s.name] * s
    scale = layout.scales[d.var.name] if out_scale is None else out_scale
    return expr.xreplace(subs) / scale


def print_formula(layout: Layout, expr: sympy.Expr, where: str,
                  names: dict[str, str] | None = None) -> str:
    """Formula body for ``expr`` with symbols read through ``names`` (default: defined names).

    Errors are re-raised with ``where`` (the plan location) in front.
    """
    try:
        return excel_formula(expr, layout.names if names is None else names)
    except UsageError as exc:
        raise type(exc)(f"{where}: {exc.message}", variable=exc.variable, hint=exc.hint) from None


def _define(wb: Workbook, layout: Layout, var: str) -> None:
    name = layout.names[var]
    wb.defined_names[name] = DefinedName(name, attr_text=layout.ref(var))


def _header(ws: Any, labels: list[str], widths: list[int]) -> None:
    for col, (label, width) in enumerate(zip(labels, widths), start=1):
        put_text(ws, 1, col, label).font = _BOLD
        ws.column_dimensions[get_column_letter(col)].width = width
    ws.freeze_panes = "A2"


def _validation(var: SheetVar) -> DataValidation | None:
    if var.choices:
        listing = ",".join(c.replace('"', "") for c in var.choices)
        return DataValidation(type="list", formula1=f'"{listing}"', allow_blank=False,
                              showErrorMessage=True, error=f"{var.name} must be one of {listing}")
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


def _write_catalogs(wb: Workbook, layout: Layout) -> dict[str, dict[str, str]]:
    """Catalogs sheet; returns preset key -> {var -> INDEX/MATCH formula body}."""
    ws = wb.create_sheet("Catalogs")
    _header(ws, ["Variable", "Unit"], [22, 14])
    lookups: dict[str, dict[str, str]] = {}
    row = 3
    for p in layout.plan.presets:
        n = len(p.ids)
        last = get_column_letter(2 + n)
        put_text(ws, row, 1, f"{p.key} (catalog {p.catalog})").font = _BOLD
        id_row = row + 1
        put_text(ws, id_row, 1, "id").font = _BOLD
        for j, ident in enumerate(p.ids):
            put_text(ws, id_row, 3 + j, ident).font = _BOLD
            ws.column_dimensions[get_column_letter(3 + j)].width = max(14, len(ident) + 2)
        ids_range = f"Catalogs!$C${id_row}:${last}${id_row}"
        lookups[p.key] = {"__ids__": ids_range}
        r = id_row + 1
        for var, by_id in p.table.items():
            put_text(ws, r, 1, var)
            unit = layout.vars[var].unit if var in layout.vars else ""
            put_text(ws, r, 2, unit)
            for j, ident in enumerate(p.ids):
                if ident in by_id:
                    put_number(ws, r, 3 + j, by_id[ident])
                else:
                    put_formula(ws, r, 3 + j, "NA()")
            key = layout.names.get(p.key, p.key)
            lookups[p.key][var] = f"INDEX(Catalogs!$C${r}:${last}${r},MATCH({key},{ids_range},0))"
            r += 1
        if p.sources:
            put_text(ws, r, 1, "sources").font = _BOLD
            r += 1
            for var, cites in p.sources.items():
                put_text(ws, r, 1, var)
                for j, ident in enumerate(p.ids):
                    if ident in cites:
                        put_text(ws, r, 3 + j, cites[ident])
                r += 1
        row = r + 1
    return lookups


def _write_inputs(wb: Workbook, layout: Layout, lookups: dict[str, dict[str, str]]) -> None:
    ws = wb["Inputs"]
    _header(ws, ["Name", "Value", "Unit", "Description", "Source"], [22, 18, 14, 60, 40])
    row = 2
    for p in layout.plan.presets:
        put_text(ws, row, 1, p.key).font = _BOLD
        cell = put_text(ws, row, 2, p.selected)
        cell.protection = _UNLOCKED
        put_text(ws, row, 4, f"choose a {p.catalog} entry; the rows it drives follow its choice")
        dv = DataValidation(type="list", formula1=lookups[p.key]["__ids__"], allow_blank=False,
                            showErrorMessage=True, error=f"pick an id from the {p.catalog} catalog")
        ws.add_data_validation(dv)
        dv.add(cell.coordinate)
        layout.cells[p.key] = ("Inputs", row, 2)
        _define(wb, layout, p.key)
        row += 1
    for inp in layout.plan.inputs:
        var = inp.var
        put_text(ws, row, 1, var.name)
        if var.choices:
            cell = put_text(ws, row, 2, inp.value)
        elif inp.preset is not None:
            table = lookups.get(inp.preset, {})
            if var.name not in table:
                raise UsageError(
                    f"input '{var.name}' says preset '{inp.preset}' set it, but that preset has no "
                    f"'{var.name}' column", variable=var.name,
                    hint="add the variable to the PresetChoice table or drop Input.preset")
            cell = put_formula(ws, row, 2, table[var.name])
        else:
            cell = put_number(ws, row, 2, inp.value)
        cell.protection = _UNLOCKED
        if not var.choices:
            cell.number_format = unit_format(var.unit, inp.value, var.integer)
        dv = _validation(var)
        if dv is not None:
            ws.add_data_validation(dv)
            dv.add(cell.coordinate)
        put_text(ws, row, 3, var.unit)
        put_text(ws, row, 4, var.doc)
        put_text(ws, row, 5, inp.source or (f"preset {inp.preset}" if inp.preset else "given"))
        layout.cells[var.name] = ("Inputs", row, 2)
        _define(wb, layout, var.name)
        row += 1
    ws.protection.sheet = True


def _write_model(wb: Workbook, layout: Layout) -> None:
    ws = wb.create_sheet("Model")
    _header(ws, ["Name", "Value", "Unit", "Engine value", "Description", "Equation", "Source",
                 "Residual (should be ~0)", "Note"], [22, 18, 14, 16, 50, 50, 28, 22, 60])
    for row, d in enumerate(layout.plan.derived, start=2):
        var = d.var
        layout.cells[var.name] = ("Model", row, 2)
        put_text(ws, row, 1, var.name)
        fmt = unit_format(var.unit, d.value, var.integer)
        if d.implicit:
            cell = put_number(ws, row, 2, d.value)
            cell.protection = _UNLOCKED
        else:
            if d.expr is None:
                raise UsageError(f"derived variable '{var.name}' ({d.where}) has no expression and is "
                                 "not marked implicit", variable=var.name,
                                 hint="give Derived.expr, or implicit=True with a residual")
            cell = put_formula(ws, row, 2, print_formula(layout, display_expr(layout, d), d.where))
        cell.number_format = fmt
        put_text(ws, row, 3, var.unit)
        put_number(ws, row, 4, d.value).number_format = fmt
        put_text(ws, row, 5, var.doc)
        put_text(ws, row, 6, d.equation)
        put_text(ws, row, 7, d.where)
        # Defined before the residual is printed, which may refer to the name.
        _define(wb, layout, var.name)
        if d.implicit:
            if d.residual is not None:
                res = display_expr(layout, d, d.residual, out_scale=sympy.Integer(1))  # base units
                put_formula(ws, row, 8, print_formula(layout, res, d.where))
            put_text(ws, row, 9, f"implicit: after changing inputs, use Data > What-If > Goal Seek: "
                                  f"set H{row} to 0 by changing B{row} (or re-run concur export)")
    ws.protection.sheet = True


def _write_notes(wb: Workbook, layout: Layout) -> None:
    ws = wb.create_sheet("Notes")
    ws.column_dimensions["A"].width = 28
    ws.column_dimensions["B"].width = 100
    plan = layout.plan
    lines: list[tuple[str, str]] = [("Title", plan.title), ("About", plan.doc), ("", "")]
    lines.append(("How to use", ("Change the unlocked cells on the Inputs sheet (or pick another id in "
                                 "a preset dropdown); every formula on Model, the sweeps and Scenarios "
                                 "recalculates.")))
    lines.append(("", ("Model is protected without a password to prevent accidental edits: "
                       "Review > Unprotect Sheet if you must.")))
    lines.append(("", "Rows marked implicit hold a solved value: Goal Seek its residual cell to 0."))
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
            put_text(ws, row, 1, a).font = _BOLD
        if b:
            put_text(ws, row, 2, b)


def build_layout(plan: WorkbookPlan) -> Layout:
    """Names and scales for every plan variable; checks names are unique."""
    layout = Layout(plan=plan)
    order: list[str] = [p.key for p in plan.presets]
    for inp in plan.inputs:
        order.append(inp.var.name)
    for d in plan.derived:
        order.append(d.var.name)
    seen: set[str] = set()
    for name in order:
        if name in seen:
            raise UsageError(f"variable '{name}' appears twice in the workbook plan", variable=name,
                             hint="each input, preset key and derived variable needs its own name")
        seen.add(name)
    layout.names = mangle_all(order)
    layout.vars = plan.variables()
    layout.scales = {name: _exact(var.scale) for name, var in layout.vars.items()}
    return layout


def write_workbook(plan: WorkbookPlan, path: str | os.PathLike[str]) -> Path:
    """Write ``plan`` as a live xlsx workbook at ``path`` (atomically) and return the path.

    Raises :class:`concur.errors.UsageError` for an inconsistent plan (unknown
    symbol, duplicate name, unprintable expression); on any error the target
    file is left as it was.

        >>> write_workbook(plan, "kv.xlsx")  # doctest: +SKIP
        PosixPath('kv.xlsx')
    """
    from .whatif import write_scenarios, write_sweeps

    target = Path(path)
    layout = build_layout(plan)
    wb = Workbook()
    wb.active.title = "Inputs"
    lookups = _write_catalogs(wb, layout)
    _write_inputs(wb, layout, lookups)
    _write_model(wb, layout)
    write_sweeps(wb, layout)
    write_scenarios(wb, layout)
    _write_notes(wb, layout)
    for ws in wb.worksheets:  # print (and PDF) one page wide, landscape
        ws.page_setup.orientation = "landscape"
        ws.page_setup.fitToWidth = 1
        ws.page_setup.fitToHeight = 0
        ws.sheet_properties.pageSetUpPr.fitToPage = True
    wb.calculation.fullCalcOnLoad = True
    target.parent.mkdir(parents=True, exist_ok=True)
    return save_atomically(wb, target)


