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
  a candidate whose loop values leave their bounds fails, as the solver's trial fails;
* a goal seek against several targets *and* the searched count's own rounding (``replicas``
  under an ITL and a TTFT limit): every test at once (``AND``), each target an input cell.

**Loops inside a row.** The fleet's replicas close a second loop: the batch per replica
(in_flight / replicas) sets the decode step, which sets the residence time, which sets
in_flight. The solver tears it at the continuous ``concurrency`` and brackets the root, so the
row has no closed form. Such an implicit row becomes a :class:`~concur.excel.plan.Root`
solved *in every candidate row* when its residual is ``slope * x + (terms without x)`` for a
number ``slope`` -- then ``g(x) = x - residual/slope`` is the loop as a fixed-point map -- and
every row of its body (what the residual reads through x) has a closed form. The row writes
out a fixed number of iterates, no iterative calculation: :data:`FIXED_STEPS` steps
``x <- g(x)`` from the variable's lower bound (for an increasing g they climb towards the
*smallest* fixed point without passing it, the root the solver's scan finds first), then
:data:`SECANT_STEPS` secant steps; the root is the last iterate where ``|x - g(x)| <=``
:data:`TOLERANCE` ``* |x|``, else the row reads "no solution" (a fleet that saturates has no
fixed point: that candidate fails). The Model sheet reads the root from the picked row, so
what depends on it (the step time, ITL, TTFT) is live too. Worked example (the fleet
workbook, 50 request/s of Llama-3.1-70B on H100 TP4): at n = 3 the iterates of concurrency
run 0, 159.3, 215.3, 235.0, then the first secant step lands on 245.6297363061 (the step
time is linear in the batch there) and the rest stay: 736.9 requests in flight fit
3 x 322 x 0.8 = 772.8, so 3 replicas; n = 2 solves to 505.4 per replica, too many; at n = 1
the iterates run away (0, 478, 982, 1,669, -304, then an overflow) and the row reads "no
solution". Checked against the solver over 7,448 rows (38 catalog
models, dense, MoE, MLA and sliding-window, on six GPUs, TP 1-8, 1-100 request/s, 1-10
replicas): every iteration reached the solver's root within 1e-7; with no fixed-point steps,
secant steps from 0 missed 48 (MoE models, whose weight reads bend g near 0).

The candidates are ``floor`` .. ``max(4 x answer, floor + 15)`` (the variable's bounds
permitting), or ``floor`` .. ``search_up_to`` when the export names the top (``concur export
--search-up-to N``, ``search_up_to:`` in a workbook definition: the headroom a planner wants
before the sheet says "out of range"), at most :data:`MAX_CANDIDATES` rows (then a window
around the answer). Before a
table is accepted it is *evaluated in Python with the sheet's semantics*
(:func:`concur.excel.printer.py_function`: the same snapping floors, the same bounds tests)
and must pick exactly the solver's answer; otherwise the row stays implicit (a value and a
residual) and the plan's notes say why. Worked example: ``queueing --find servers`` with 10
erlang offered, 20 s target and ``service_level=0.8`` gives candidates 1..56; rows 1..10 read
"skip" (the queue never drains: service_level leaves [0, 1]), 11..13 FALSE, 14 TRUE, so
``servers`` is 14; doubling ``arrival_rate`` on the Inputs sheet moves the first TRUE to 24.

Limits: a search whose chain from the searched variable to its goal passes through an
implicit row that is no such root (a residual nonlinear in its own variable, a loop inside
the loop) stays implicit; so do continuous searches (no finite candidate list) and variables
shown in a scaled unit. A root found by the iterations is not proven to be the smallest
fixed point where g is not increasing; the table is kept only when, for the exported
question, it picks the solver's answer and its root there is the solver's (to 1e-6). Sweeps
and scenarios hold a searched answer, and a root it solves, at their Model-sheet values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import sympy

from ..errors import UsageError
from .plan import Derived, Root, Search

__all__ = [
    "FIXED_STEPS",
    "MAX_CANDIDATES",
    "SECANT_STEPS",
    "TOLERANCE",
    "Candidate",
    "goal_test",
    "iterate_root",
    "make_live",
    "pick",
    "solve_root",
]

MAX_CANDIDATES = 256
"""Rows of one candidate table. A row of the fleet workbook's replica search is some 160 cells
(the fixed-point iterations of its root): 1,000 rows were 160,000 cells and 15 s of openpyxl;
256 rows are about 41,000 cells, a couple of seconds. A count, so the export stays bounded
whatever the answer or ``search_up_to``."""
FIXED_STEPS = 3  # x <- g(x) from the lower bound before the secant steps (see iterate_root)
SECANT_STEPS = 9
TOLERANCE = 1e-9  # |x - g(x)| <= TOLERANCE * |x| at the last iterate, or the row has no solution
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


def _range(answer: int, floor: int, ceiling: int | None, up_to: int | None = None) -> tuple[int, int]:
    high = max(_SPAN * answer, floor + _MIN_ROWS - 1) if up_to is None else up_to
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


def _moved(rows: dict[str, Derived], x: str) -> set[str]:
    """``x`` and every row whose value depends on it (an implicit row through its residual)."""
    moved = {x}
    changed = True
    while changed:
        changed = False
        for name, d in rows.items():
            if name not in moved and _reads(d) & moved:
                moved.add(name)
                changed = True
    return moved


def _root(
    rows: dict[str, Derived], name: str, searched: str, bounds: Mapping[str, tuple[float | None, float | None]]
) -> Root | None:
    """``name`` as a :class:`Root` solved in each candidate row of ``searched``: an implicit row
    whose residual is ``slope * name + ...`` (a nonzero number ``slope``) and whose loop body --
    the rows the residual reads through ``name`` -- are all closed forms. None otherwise."""
    d = rows[name]
    if not d.implicit or d.residual is None or d.expr is not None or d.search is not None:
        return None
    x = next((s for s in d.residual.free_symbols if s.name == name), None)
    if x is None:
        return None
    slope = sympy.diff(d.residual, x)
    if not slope.is_number or not slope.is_finite or slope == 0:
        return None
    inside = _moved(rows, name)
    body: list[str] = []

    def need(n: str) -> bool:
        if n in (name, searched) or n not in inside or n in body:
            return True
        e = rows[n].expr
        if e is None or not all(need(m) for m in sorted(_symbols(e))):
            return False
        body.append(n)
        return True

    if not all(need(n) for n in sorted(_symbols(d.residual))):
        return None
    lo = bounds.get(name, (None, None))[0]
    start = 0.0 if lo is None else lo / d.var.scale
    return Root(name, d.residual, float(slope), tuple(body), start, FIXED_STEPS, SECANT_STEPS, TOLERANCE)


def _columns(
    rows: dict[str, Derived], x: str, wanted: set[str], bounds: Mapping[str, tuple[float | None, float | None]]
) -> tuple[list[str], dict[str, Root]] | None:
    """Derived rows that move with ``x`` and that ``wanted`` needs, dependencies first, and the
    roots among them; None when one of them can be evaluated per row neither in closed form nor
    as a :class:`Root` (a searched row, a loop whose body has no closed form)."""
    moved = _moved(rows, x)
    order: list[str] = []
    roots: dict[str, Root] = {}
    seen: set[str] = set()

    def place(*names: str) -> None:
        order.extend(n for n in names if n not in order)

    def visit(name: str) -> bool:
        if name in seen or name == x or name not in moved:
            return True
        seen.add(name)
        d = rows[name]
        if d.expr is not None:
            if not all(visit(n) for n in sorted(_symbols(d.expr))):
                return False
            place(name)
            return True
        root = _root(rows, name, x, bounds)
        if root is None:
            return False
        outside = _symbols(root.residual).union(*(_symbols(rows[b].expr) for b in root.body))
        seen.update(root.body)  # computed from the root, after it
        if not all(visit(n) for n in sorted(outside - set(root.body) - {name})):
            return False
        roots[name] = root
        place(name, *root.body)
        return True

    if not all(visit(n) for n in sorted(wanted)):
        return None
    return order, roots


def iterate_root(root: Root, f: Callable[[float], float]) -> float | None:
    """The iterations a candidate row writes out for ``root``, in Python: the solved value, or None
    where the row reads "no solution" (or an evaluation fails).

    ``f(x)`` is ``x - g(x)`` in the root's display unit. ``fixed_steps`` steps ``x <- g(x)`` from
    ``start`` climb towards the smallest fixed point of an increasing ``g`` without passing it;
    secant steps through the last two iterates then converge superlinearly.
    """
    try:
        xs, fs = [root.start], [f(root.start)]
        for _ in range(root.fixed_steps):
            xs.append(xs[-1] - fs[-1])
            fs.append(f(xs[-1]))
        for _ in range(root.secant_steps):
            x0, x1, f0, f1 = xs[-2], xs[-1], fs[-2], fs[-1]
            xs.append(x1 if f1 == f0 else x1 - f1 * (x1 - x0) / (f1 - f0))
            fs.append(f(xs[-1]))
    except (ArithmeticError, ValueError, TypeError):
        return None
    x, fx = xs[-1], fs[-1]
    if not (math.isfinite(x) and math.isfinite(fx)) or abs(fx) > root.tolerance * abs(x):
        return None
    return x


def solve_root(
    root: Root,
    env: Mapping[str, float],
    funcs: Mapping[str, Callable[[Mapping[str, float]], float]],
    scale: float = 1.0,
) -> float | None:
    """``root`` solved in one candidate row as the sheet solves it: base units, or None ("no solution").

    ``env`` holds the row's other values (base units); ``funcs`` the compiled closed forms of the
    body rows and, under the root's own name, its residual (:func:`concur.excel.printer.py_function`);
    ``scale`` the base-unit size of the root's display unit, in which the sheet iterates.
    """

    def f(x: float) -> float:
        trial = dict(env)
        trial[root.variable] = x * scale
        for b in root.body:
            trial[b] = funcs[b](trial)
        return float(funcs[root.variable](trial)) / (root.slope * scale)

    x = iterate_root(root, f)
    return None if x is None else x * scale


def _evaluate(
    name: str, trial: dict[str, float], rows: dict[str, Derived], funcs: dict[str, Any], roots: dict[str, Root]
) -> float | None:
    """One column of a candidate row, as the sheet computes it (None: an error or "no solution")."""
    root = roots.get(name)
    if root is None:
        return float(funcs[name](trial))
    return solve_root(root, trial, funcs, rows[name].var.scale)


def _verdict(
    c: Candidate,
    n: int,
    columns: list[str],
    rows: dict[str, Derived],
    funcs: dict[str, Any],
    env: dict[str, float],
    bounds: Mapping[str, tuple[float | None, float | None]],
    roots: dict[str, Root],
) -> tuple[bool | None, dict[str, float]]:
    """One candidate as the sheet judges it (None: skipped), and the row's values (base units)."""
    trial = dict(env)
    trial[c.variable] = float(n)
    invalid = None if c.skip else False
    for name in columns:
        try:
            value = _evaluate(name, trial, rows, funcs, roots)
        except (ArithmeticError, ValueError, TypeError):
            return invalid, trial
        if value is None or not math.isfinite(value):
            return invalid, trial
        lo, hi = bounds.get(name, (None, None))
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return invalid, trial
        trial[name] = value
    try:
        if not all(funcs[f"check{i}"](trial) for i in range(len(c.checks))):
            return invalid, trial
        return bool(funcs["test"](trial)), trial
    except (ArithmeticError, ValueError, TypeError):
        return invalid, trial


def make_live(
    derived: list[Derived],
    candidates: list[Candidate],
    values: Mapping[str, float],
    bounds: Mapping[str, tuple[float | None, float | None]],
    search_up_to: int | None = None,
) -> tuple[list[Derived], list[str]]:
    """``derived`` with each candidate's row turned into a live search where the table reproduces it.

    ``values`` are the solution's base-unit values (every input and derived variable);
    ``bounds`` the base-unit bounds of derived variables (what the sheet tests);
    ``search_up_to`` the largest candidate of every table (None: four times the answer, at least
    16 rows). Returns the new rows and one note per candidate left implicit, saying why. Raises
    :class:`UsageError` when ``search_up_to`` is below an answer or over :data:`MAX_CANDIDATES`
    rows.
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
        found = _columns(rows, c.variable, wanted, bounds) if why is None else None
        if why is None and found is None:
            why = "its goal depends on it through a value with no closed form"
        if why is None and found is not None:
            columns, roots = found
            _check_up_to(search_up_to, c, int(answer))
            low, high = _range(int(answer), c.floor, c.ceiling, search_up_to)
            funcs: dict[str, Any] = {
                name: py_function(rows[name].expr if name not in roots else roots[name].residual) for name in columns
            }
            funcs["test"] = py_function(c.test)
            for i, k in enumerate(c.checks):
                funcs[f"check{i}"] = py_function(k)
            env = {**values, **dict(c.extra)}
            ns = list(range(low, high + 1))
            judged = [_verdict(c, n, columns, rows, funcs, env, bounds, roots) for n in ns]
            index, status = pick([v for v, _ in judged], c.direction, low == c.floor)
            if status != "ok" or index is None or ns[index] != int(answer):
                got = ns[index] if index is not None else status
                why = f"a table of {low}..{high} picks {got}, not {int(answer)}"
            else:
                why = _roots_differ(roots, judged[index][1], values, rows)
            if why is None:
                search = Search(
                    c.test,
                    tuple(columns),
                    low,
                    high,
                    c.direction,
                    c.floor,
                    c.ceiling,
                    c.checks,
                    c.skip,
                    c.about,
                    tuple(roots.values()),
                )
                rows[c.variable] = replace(d, expr=None, implicit=False, residual=None, search=search)
                for name in roots:
                    rows[name] = replace(rows[name], implicit=False, residual=None, solved_in=c.variable)
                continue
        notes.append(f"{c.variable} stays implicit (Goal Seek its residual after editing inputs): {why}")
    return [rows[d.var.name] for d in derived], notes


def _check_up_to(up_to: int | None, c: Candidate, answer: int) -> None:
    if up_to is None:
        return
    if up_to < answer:
        raise UsageError(
            f"search_up_to = {up_to} is below the answer {c.variable} = {answer}: the table would not hold it",
            variable=c.variable,
            hint=f"give at least {answer}, with the headroom the workbook should cover (e.g. {4 * answer})",
        )
    if up_to - c.floor + 1 > MAX_CANDIDATES:
        raise UsageError(
            f"search_up_to = {up_to} makes {up_to - c.floor + 1:,} candidate rows for {c.variable}; "
            f"a table holds at most {MAX_CANDIDATES:,}",
            variable=c.variable,
            hint=f"give at most {c.floor + MAX_CANDIDATES - 1}",
        )


def _roots_differ(
    roots: dict[str, Root], row: Mapping[str, float], values: Mapping[str, float], rows: dict[str, Derived]
) -> str | None:
    """Why the answer row's roots are not the solver's values (None: they agree to 1e-6)."""
    for name in roots:
        mine, theirs = row.get(name), values.get(name)
        if mine is None or theirs is None or abs(mine - theirs) > 1e-6 * max(abs(theirs), 1e-300):
            unit = f" {rows[name].var.unit}" if rows[name].var.unit else ""
            got = "no solution" if mine is None else f"{name} = {mine:.9g}{unit}"
            return (
                f"its row of the answer solves {got}, not the solver's {theirs if theirs is None else f'{theirs:.9g}'}"
            )
    return None
