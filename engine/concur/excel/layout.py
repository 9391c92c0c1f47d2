"""Where each variable of a workbook lives, and how its formulas are printed over the cells.

:class:`Layout` is filled while the workbook is written (defined names, cells, display scales,
number formats) and read by every sheet writer: the Inputs and Model sheets
(:mod:`concur.excel.writer`), the scenario and sweep sheets (:mod:`concur.excel.whatif`) and the
search sheets (:mod:`concur.excel.search`). The printing helpers turn a sympy expression in base
units into a formula over display-unit cells (``kv_tokens/context``, not
``Model!$C$9/Inputs!$C$12``). It imports none of the sheet writers, so they can all import it.

Every sympy step of writing a workbook goes through the layout's :class:`Tape`: printing a
formula (:func:`print_formula`), rescaling an expression (:func:`display_expr`,
:func:`over_display`) and the few sheet helpers that compute from expressions
(:meth:`Tape.run`). Recording, the tape keeps each printed result in order; replaying (a
workbook plan and its tape read back from the cache, :mod:`concur.excel.memo`), it hands them
back in the same order without importing sympy -- writing the same plan takes the same path.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from openpyxl.utils import get_column_letter, quote_sheetname

from ..errors import UsageError
from .plan import Derived, SheetVar, WorkbookPlan

if TYPE_CHECKING:
    import sympy

T = TypeVar("T")


class Tape:
    """What the sympy steps of writing one workbook printed, in order (see the module docstring).

    ``Tape()`` records; ``Tape(entries)`` replays ``entries`` (JSON data: text, lists, dicts).
    :meth:`run` of a step nested in another step's :meth:`run` is neither recorded nor replayed
    on its own: the outer step's result stands for it. Replaying past the end, or leaving entries
    over (:meth:`finished`), is a :class:`RuntimeError`: the plan was not the recorded one.
    """

    def __init__(self, entries: list[Any] | None = None) -> None:
        self.replaying = entries is not None
        self.entries: list[Any] = list(entries or [])
        self._next = 0
        self._depth = 0

    def run(
        self,
        step: Callable[[], T],
        encode: Callable[[T], Any] | None = None,
        decode: Callable[[Any], T] | None = None,
    ) -> T:
        """``step()``, its result recorded as JSON data (``encode``; default: as it is); or,
        replaying, the recorded entry (through ``decode``; ``decode(encode(x))`` equals ``x``)."""
        if self.replaying and self._depth == 0:
            if self._next >= len(self.entries):
                raise RuntimeError("workbook tape: replayed past its end")
            entry = self.entries[self._next]
            self._next += 1
            return decode(entry) if decode is not None else cast(T, entry)
        self._depth += 1
        try:
            value = step()
        finally:
            self._depth -= 1
        if self._depth == 0:
            self.entries.append(encode(value) if encode is not None else value)
        return value

    def finished(self) -> None:
        """Check that a replay used every entry."""
        if self.replaying and self._next != len(self.entries):
            raise RuntimeError(f"workbook tape: {len(self.entries) - self._next} entries left over")


__all__ = ["Layout", "Tape", "display_expr", "over_display", "print_formula", "sheet_ref", "unit_label"]


@dataclass
class Layout:
    """Where each variable lives: defined names, cells, scales, formats (filled while writing)."""

    plan: WorkbookPlan
    names: dict[str, str] = field(default_factory=dict)  # variable -> defined name
    cells: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # var -> (sheet, row, col)
    scales: dict[str, sympy.Rational] = field(default_factory=dict)  # empty while replaying
    vars: dict[str, SheetVar] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)  # var -> number format of its cell
    inputs_rows: tuple[int, int, int] = (0, 0, 0)  # Inputs sheet: first answer, table header, last row
    inlined: dict[str, sympy.Expr] = field(default_factory=dict)  # derived -> display expr over inputs
    checks: dict[str, str] = field(default_factory=dict)  # searched variable -> its range check cell
    tape: Tape = field(default_factory=Tape)

    @property
    def replaying(self) -> bool:
        """The formulas come from a recorded tape: no expression is computed (nor sympy imported)."""
        return self.tape.replaying

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


def display_expr(layout: Layout, d: Derived, expr: Any = None, out_scale: Any = None) -> Any:
    """``expr`` (default ``d.expr``) over display-unit symbols, divided by ``out_scale``.

    ``out_scale`` defaults to ``d``'s scale, so the result is in ``d``'s display unit;
    pass 1 to keep base units (residuals). Floats become exact rationals first
    (:func:`concur.excel.printer.tidy`) so unit factors cancel instead of piling up. None while
    replaying (:class:`Tape`).
    """
    if layout.replaying:
        return None
    expr = d.expr if expr is None else expr
    assert expr is not None, "a derived row always has a closed form or a residual"
    scale = layout.scales[d.var.name] if out_scale is None else out_scale
    return over_display(layout, d, expr) / scale


def over_display(layout: Layout, d: Derived, expr: Any) -> Any:
    """``expr`` (base units; a number or a relation) with each symbol rescaled from its display unit.

    ``d`` is the row the expression belongs to (named in the error for an unknown symbol).
    None while replaying (:class:`Tape`): the printed text is on the tape.
    """
    if layout.replaying:
        return None
    from .printer import tidy

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


def print_formula(layout: Layout, expr: Any, where: str, names: dict[str, str] | None = None) -> str:
    """Formula body for ``expr`` with symbols read through ``names`` (default: defined names),
    through the layout's :class:`Tape`. ``expr`` may be a function making the expression (so
    that replaying does not make it).

    Errors are re-raised with ``where`` (the plan location) in front.
    """

    def step() -> str:
        from .printer import excel_formula

        made = expr() if isinstance(expr, types.FunctionType) else expr
        try:
            return excel_formula(made, layout.names if names is None else names)
        except UsageError as exc:
            raise type(exc)(f"{where}: {exc.message}", variable=exc.variable, hint=exc.hint, kind=exc.kind) from None

    return layout.tape.run(step, decode=str)
