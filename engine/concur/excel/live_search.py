"""Live whole-number answers: a searched integer as a pick from a candidate table.

How is this designed, and why?
------------------------------
Some answers are not a formula of the inputs but the result of a search: the smallest
``servers`` whose service level reaches 80 % (a goal seek, ``Method.SEARCH``), the smallest
``replicas`` whose requirement ``ceil(in_flight / (per_replica_concurrency * utilization))``
they cover when ``in_flight`` itself depends on ``replicas`` (a loop torn at an integer,
``Method.INTEGER_TEAR``). A spreadsheet can do that search without Goal Seek when the
candidates are few: a helper sheet evaluates the model once per candidate n (row by row, the
way a sweep sheet does), marks each row TRUE/FALSE, and the answer is ``INDEX``/``MATCH`` of
the first TRUE (or, for a "largest" search, the last TRUE before the first FALSE). Every
input stays live, and the *target* of a goal seek (the service level, the budget) becomes an
input cell of its own (``service_level_target``) instead of a number buried in a formula.

This module builds the plan side (:class:`~concur.excel.plan.Search`); the sheet is written by
:mod:`concur.excel.search`. :func:`make_live` is given the rows of the plan and, for each
candidate answer, the relation a candidate must satisfy (in base units):

* goal seek: ``goal >= target - 1e-9*|target|`` (``at_least``), ``goal <= target + ...``
  (``at_most``) or ``|goal - target| <= 1e-6*|target|`` (no limit: equality) -- the tolerances
  of :func:`concur.solver.goal_seek.search`; a candidate that breaks a constraint the search
  checks (``attention_heads % tp == 0``) or whose values leave their bounds is skipped, as
  the goal seek skips it;
* integer tear: ``ceil(...) <= n`` (smallest n; for ``floor``: ``floor(...) >= n``, largest);
  a candidate whose loop values leave their bounds fails, as the solver's trial fails.

The candidates are ``floor`` .. ``max(4 x answer, floor + 16)`` (the variable's bounds
permitting), at most :data:`MAX_CANDIDATES` rows (then a window around the answer). Before a
table is accepted it is *evaluated in Python with the sheet's semantics*
(:func:`concur.excel.printer.py_function`: the same snapping floors, the same bounds tests)
and must pick exactly the solver's answer; otherwise the row stays implicit (a value and a
residual) and the plan's notes say why. Worked example: ``queueing --find servers`` with 10
erlang offered, 20 s target and ``service_level=0.8`` gives candidates 1..56; rows 1..10 read
"skip" (the queue never drains: service_level leaves [0, 1]), 11..13 FALSE, 14 TRUE, so
``servers`` is 14; doubling ``arrival_rate`` on the Inputs sheet moves the first TRUE to 24.

Limits: a search whose chain from the searched variable to its goal passes through an
implicit row (a numeric root, a torn continuous loop) stays implicit; so do continuous
searches (no finite candidate list) and variables shown in a scaled unit. Sweeps and
scenarios hold a searched answer at its Inputs-sheet value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import sympy

from .plan import Derived, Search

__all__ = ["MAX_CANDIDATES", "Candidate", "goal_test", "make_live", "pick"]

MAX_CANDIDATES = 1000
_SPAN = 4  # candidates reach this many times the exported answer
_MIN_ROWS = 16


@dataclass(frozen=True)
class Candidate:
    """A searched integer that may become live: what a candidate n must satisfy, and how.

    ``test`` and ``checks`` are sympy booleans in base units; ``floor``/``ceiling`` the
    variable's own integer bounds (``None``: open above); ``extra`` values (base units) that
    the test reads but the solution does not hold (the target of a goal seek).
    """

    variable: str
    test: sympy.Basic
    direction: str
    skip: bool
    floor: int
    ceiling: int | None
    about: str
    checks: tuple[sympy.Basic, ...] = ()
    extra: tuple[tuple[str, float], ...] = ()


def goal_test(goal: sympy.Symbol, target: sympy.Symbol, sense: str) -> sympy.Basic:
    """The goal seek's acceptance test as a relation (tolerances of the solver's ``meets``)."""
    if sense == "at_least":
        return sympy.Ge(goal, target - sympy.Float(1e-9) * sympy.Abs(target))
    if sense == "at_most":
        return sympy.Le(goal, target + sympy.Float(1e-9) * sympy.Abs(target))
    return sympy.Le(sympy.Abs(goal - target), sympy.Float(1e-6) * sympy.Abs(target))


def pick(verdicts: list[bool | None], direction: str, low_is_floor: bool) -> tuple[int | None, str]:
    """(row index of the answer, status) for a column of verdicts, as the sheet's formulas pick it.

    ``None`` is a skipped row. smallest: the first True; largest: the last True before the first
    False. Status ``"ok"``, ``"out of range"`` (the answer may lie outside the table) or
    ``"none passes"`` (no candidate passes, and the table starts at the variable's lower bound).
    """
    edge = "none passes" if low_is_floor else "out of range"
    if direction == "smallest":
        first = next((i for i, v in enumerate(verdicts) if v is True), None)
        if first is None:
            return None, "out of range"
        if first == 0 and not low_is_floor:
            return None, "out of range"
        return first, "ok"
    stop = next((i for i, v in enumerate(verdicts) if v is False), None)
    if stop is None:
        return None, "out of range"
    best = next((i for i in range(stop - 1, -1, -1) if verdicts[i] is True), None)
    if best is None:
        return None, edge
    return best, "ok"


def _range(answer: int, floor: int, ceiling: int | None) -> tuple[int, int]:
    high = max(_SPAN * answer, floor + _MIN_ROWS - 1)
    if ceiling is not None:
        high = min(high, ceiling)
    low = floor
    if high - low + 1 > MAX_CANDIDATES:
        low = max(floor, answer - MAX_CANDIDATES // 4)
        high = low + MAX_CANDIDATES - 1 if ceiling is None else min(ceiling, low + MAX_CANDIDATES - 1)
    return low, high


def _symbols(e: Any) -> set[str]:
    return {s.name for s in e.free_symbols} if e is not None else set()


def _reads(d: Derived) -> set[str]:
    if d.expr is not None:
        return _symbols(d.expr)
    return _symbols(d.residual)


def _columns(rows: dict[str, Derived], x: str, wanted: set[str]) -> list[str] | None:
    """Derived rows that move with ``x`` and that ``wanted`` needs, dependencies first; None when
    one of them has no closed form (an implicit or searched row cannot be evaluated per row)."""
    moved = {x}
    changed = True
    while changed:
        changed = False
        for name, d in rows.items():
            if name not in moved and _reads(d) & moved:
                moved.add(name)
                changed = True
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> bool:
        if name in seen or name == x or name not in moved:
            return True
        seen.add(name)
        d = rows[name]
        if d.expr is None:
            return False
        if not all(visit(n) for n in sorted(_symbols(d.expr))):
            return False
        order.append(name)
        return True

    if not all(visit(n) for n in sorted(wanted)):
        return None
    return order


def _verdict(c: Candidate, n: int, columns: list[str], rows: dict[str, Derived], funcs: dict[str, Any],
             env: dict[str, float], bounds: Mapping[str, tuple[float | None, float | None]]) -> bool | None:
    """One candidate as the sheet judges it (None: skipped)."""
    trial = dict(env)
    trial[c.variable] = float(n)
    invalid = None if c.skip else False
    for name in columns:
        try:
            value = funcs[name](trial)
        except (ArithmeticError, ValueError, TypeError):
            return invalid
        if not math.isfinite(value):
            return invalid
        lo, hi = bounds.get(name, (None, None))
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return invalid
        trial[name] = value
    try:
        if not all(funcs[f"check{i}"](trial) for i in range(len(c.checks))):
            return invalid
        return bool(funcs["test"](trial))
    except (ArithmeticError, ValueError, TypeError):
        return invalid


def make_live(derived: list[Derived], candidates: list[Candidate], values: Mapping[str, float],
              bounds: Mapping[str, tuple[float | None, float | None]]) -> tuple[list[Derived], list[str]]:
    """``derived`` with each candidate's row turned into a live search where the table reproduces it.

    ``values`` are the solution's base-unit values (every input and derived variable);
    ``bounds`` the base-unit bounds of derived variables (what the sheet tests). Returns the new
    rows and one note per candidate left implicit, saying why.
    """
    from .printer import py_function

    rows = {d.var.name: d for d in derived}
    notes: list[str] = []
    for c in candidates:
        d = rows.get(c.variable)
        if d is None:
            continue
        answer = d.value
        why = None
        if not d.var.integer or not float(answer).is_integer():
            why = "a continuous value has no finite list of candidates"
        elif d.var.scale != 1:
            why = f"it is shown in a scaled unit ({d.var.unit})"
        wanted = _symbols(c.test).union(*(_symbols(k) for k in c.checks))
        columns = _columns(rows, c.variable, wanted) if why is None else None
        if why is None and columns is None:
            why = "its goal depends on it through a value with no closed form"
        if why is None and columns is not None:
            low, high = _range(int(answer), c.floor, c.ceiling)
            funcs: dict[str, Any] = {name: py_function(rows[name].expr) for name in columns}
            funcs["test"] = py_function(c.test)
            for i, k in enumerate(c.checks):
                funcs[f"check{i}"] = py_function(k)
            env = {**values, **dict(c.extra)}
            ns = list(range(low, high + 1))
            verdicts = [_verdict(c, n, columns, rows, funcs, env, bounds) for n in ns]
            index, status = pick(verdicts, c.direction, low == c.floor)
            if status != "ok" or index is None or ns[index] != int(answer):
                got = ns[index] if index is not None else status
                why = f"a table of {low}..{high} picks {got}, not {int(answer)}"
            else:
                search = Search(c.test, tuple(columns), low, high, c.direction, c.floor, c.ceiling, c.checks,
                                c.skip, c.about)
                rows[c.variable] = replace(d, expr=None, implicit=False, residual=None, search=search)
                continue
        notes.append(f"{c.variable} stays implicit (Goal Seek its residual after editing inputs): {why}")
    return [rows[d.var.name] for d in derived], notes
