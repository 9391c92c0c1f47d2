"""Where each variable of a workbook lives, and how its formulas are printed over the cells.

:class:`Layout` is filled while the workbook is written (defined names, cells, display scales,
number formats) and read by every sheet writer: the Inputs and Model sheets
(:mod:`concur.excel.writer`), the scenario and sweep sheets (:mod:`concur.excel.whatif`) and the
search sheets (:mod:`concur.excel.search`). The printing helpers turn a sympy expression in base
units into a formula over display-unit cells (``kv_tokens/context``, not
``Model!$C$9/Inputs!$C$12``). It imports none of the sheet writers, so they can all import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, cast

import sympy
from openpyxl.utils import get_column_letter, quote_sheetname

from ..errors import UsageError
from .plan import Derived, SheetVar, WorkbookPlan
from .printer import excel_formula, tidy

__all__ = ["Layout", "display_expr", "over_display", "print_formula", "sheet_ref", "unit_label"]


@dataclass
class Layout:
    """Where each variable lives: defined names, cells, scales, formats (filled while writing)."""

    plan: WorkbookPlan
    names: dict[str, str] = field(default_factory=dict)  # variable -> defined name
    cells: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # var -> (sheet, row, col)
    scales: dict[str, sympy.Rational] = field(default_factory=dict)
    vars: dict[str, SheetVar] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)  # var -> number format of its cell
    inputs_rows: tuple[int, int, int] = (0, 0, 0)  # Inputs sheet: first answer, table header, last row
    inlined: dict[str, sympy.Expr] = field(default_factory=dict)  # derived -> display expr over inputs
    checks: dict[str, str] = field(default_factory=dict)  # searched variable -> its range check cell

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
    return cast(str, quote_sheetname(title))  # openpyxl ships no type hints


def unit_label(var: SheetVar) -> str:
    """The unit column's text: the display unit (a fraction's ``%`` is in its number format)."""
    return var.unit


def display_expr(
    layout: Layout, d: Derived, expr: sympy.Expr | None = None, out_scale: sympy.Rational | None = None
) -> sympy.Expr:
    """``expr`` (default ``d.expr``) over display-unit symbols, divided by ``out_scale``.

    ``out_scale`` defaults to ``d``'s scale, so the result is in ``d``'s display unit;
    pass 1 to keep base units (residuals). Floats become exact rationals first
    (:func:`concur.excel.printer.tidy`) so unit factors cancel instead of piling up.
    """
    expr = d.expr if expr is None else expr
    assert expr is not None, "a derived row always has a closed form or a residual"
    scale = layout.scales[d.var.name] if out_scale is None else out_scale
    return over_display(layout, d, expr) / scale


def over_display(layout: Layout, d: Derived, expr: Any) -> Any:
    """``expr`` (base units; a number or a relation) with each symbol rescaled from its display unit.

    ``d`` is the row the expression belongs to (named in the error for an unknown symbol).
    """
    expr = tidy(expr)
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
    return expr.xreplace(subs)


def print_formula(layout: Layout, expr: sympy.Expr, where: str, names: dict[str, str] | None = None) -> str:
    """Formula body for ``expr`` with symbols read through ``names`` (default: defined names).

    Errors are re-raised with ``where`` (the plan location) in front.
    """
    try:
        return excel_formula(expr, layout.names if names is None else names)
    except UsageError as exc:
        raise type(exc)(f"{where}: {exc.message}", variable=exc.variable, hint=exc.hint, kind=exc.kind) from None
