"""Goal seek: the smallest (or largest) value of an unknown that meets a target.

Used when the asked variable ``x`` lies upstream of a given target ``g`` that
cannot be inverted exactly: ``g`` is a floor/ceil output (users, replicas), an
inequality (``limit: at_least``/``at_most``: a service level, a budget), or
``x`` is an integer (tp, servers, replicas). The model is evaluated *forward*
with ``x`` as a given, so every equation keeps its natural direction.

The sense of the goal: a variable declared ``limit: at_least`` must reach the
given value, ``at_most`` must stay under it; a variable without a declared
limit must equal it. For an ``at_least`` goal that grows with ``x`` the answer
is the smallest ``x`` that reaches it (the memory 100 users need); when it
shrinks with ``x``, the largest (the longest context that still fits 100 users).
Integer unknowns are scanned over their bounds (skipping values that break a
constraint such as ``attention_heads % tp == 0``) or bisected when the range is
wide; continuous unknowns are bracketed and bisected to 1e-12 relative.
The search assumes the goal is monotone in ``x`` over the bounds; the trace
says which value was chosen and what it gives.
"""

from __future__ import annotations

import math
from typing import Any

from . import integers as frontier
from ..errors import BudgetError, ConcurError, InfeasibleError, UsageError
from ..lang.expr import compile_node, names_in
from ..lang.model import Model
from .solution import Givens, Method, Solution, Step, show_value
from .budget import spend
from .question import run_question

__all__ = ["search", "goal_sense"]



def search(model: Model, find: tuple[str, ...], known: dict[str, float], givens: Givens, x: str,
           goal: str) -> Solution:
    xv = model.variables[x]
    target = known[goal]
    sense = goal_sense(model, goal)
    base_known = {k: v for k, v in known.items() if k != goal}
    sources = dict(givens.sources)
    last_error: list[ConcurError] = []

    def evaluate(value: float) -> float | None:
        spend(x, f"give {x} directly, or a bound on it")
        try:
            _plan, env, _trace = run_question(model, {**base_known, x: value}, (goal,), sources, check=False)
        except ConcurError as exc:
            if isinstance(exc, BudgetError):
                raise
            last_error[:] = [exc]
            return None
        except (ArithmeticError, ValueError):
            return None
        for con in model.constraints:
            if x in names_in(con.expr) and names_in(con.expr) <= env.keys():
                try:
                    if not compile_node(con.expr)(env):
                        return None
                except (ArithmeticError, ValueError):
                    return None
        return env[goal]

    def meets(v: float | None) -> bool:
        if v is None:
            return False
        tol = 1e-9 * max(abs(target), 1e-300)
        if sense == "at_least":
            return v >= target - tol
        if sense == "at_most":
            return v <= target + tol
        return abs(v - target) <= 1e-6 * max(abs(target), 1e-300)

    lo, hi = xv.bounds
    if xv.integer:
        lo_i = int(math.ceil(lo)) if lo is not None else (1 if (hi is None or hi >= 1) else 0)
        hi_i = int(math.floor(hi)) if hi is not None else 1 << 40
        chosen = _integer_search(evaluate, meets, lo_i, hi_i)
    else:
        lo_f = lo if lo is not None and lo > 0 else None
        chosen = _continuous_search(evaluate, meets, lo_f, hi, sense, xv.default)
    if chosen is None:
        word = {"at_least": "at least", "at_most": "at most", "equal": "exactly"}[sense]
        why = f"; {last_error[0].render_body()}" if last_error else ""
        raise InfeasibleError(
            f"no {x} within its bounds gives {goal} {word} {show_value(model, goal, target)}{why}", variable=x,
            hint="relax the target, or change another given")
    value, direction = chosen
    plan, env, trace = run_question(model, {**base_known, x: value}, find + (goal,) if goal not in find else find,
                                    sources)
    achieved = env[goal]
    word = {"at_least": "at least", "at_most": "at most", "equal": "exactly"}[sense]
    note = (f"{direction} {x} giving {goal} {word} {show_value(model, goal, target)} "
            f"(it gives {show_value(model, goal, achieved)})")
    trace = [s for s in trace if s.variable != x]
    trace.insert(0, Step(x, value, Method.SEARCH, None, note))
    return Solution(model, find, dict(env), givens, trace, notes=[note], plan=plan)


def goal_sense(model: Model, goal: str) -> str:
    """How a search meets ``goal``: ``at_least``, ``at_most`` or ``equal`` (read-only; the Excel
    exporter prints the same test into its candidate tables)."""
    return model.variables[goal].limit or _implied_sense(model, goal)


def _implied_sense(model: Model, goal: str) -> str:
    """A goal without a declared limit: a ``ceil`` output is a requirement (at most the given count:
    the replicas you have), a ``floor`` output a capacity (at least: the users you need)."""
    from ..lang.expr import Call, Var, walk

    for eq in model.equations:
        if isinstance(eq.lhs, Var) and eq.lhs.name == goal:
            rounding = {n.fn for n in walk(eq.rhs) if isinstance(n, Call) and n.fn in ("ceil", "floor")}
            if rounding == {"ceil"}:
                return "at_most"
            if rounding == {"floor"}:
                return "at_least"
    return "equal"


def _integer_search(evaluate: Any, meets: Any, lo: int, hi: int) -> tuple[float, str] | None:
    """Smallest n meeting the goal when it fails at ``lo``; largest n meeting it when it holds at ``lo``.

    Values that break a constraint (``evaluate`` returns None) are skipped, never taken.
    """
    def goal(n: int) -> bool | None:
        value = evaluate(float(n))
        return None if value is None else bool(meets(value))

    if goal(lo) is True:
        best = frontier.largest(goal, lo, hi)
        return None if best is None else (float(best), "largest")
    first = frontier.smallest(goal, lo, hi)
    return None if first is None else (float(first), "smallest")


def _continuous_search(evaluate: Any, meets: Any, lo: float | None, hi: float | None, sense: str,
                       start: float | None) -> tuple[float, str] | None:
    x0 = start if start and start > 0 else (lo * 2 if lo else 1.0)
    grid = [x0 * 2.0 ** k for k in range(-60, 61)]
    if lo is not None:
        grid = [g for g in grid if g >= lo] or [lo]
        grid.insert(0, lo)
    if hi is not None:
        grid = [g for g in grid if g <= hi] + [hi]
    values = [(g, evaluate(g)) for g in grid]
    ok = [meets(v) for _, v in values]
    if not any(ok):
        return None
    first_ok = ok.index(True)
    last_ok = len(ok) - 1 - ok[::-1].index(True)
    if first_ok > 0:
        a, b = values[first_ok - 1][0], values[first_ok][0]
        return _bisect(evaluate, meets, a, b, want_low=True), "smallest"
    if last_ok < len(ok) - 1:
        a, b = values[last_ok][0], values[last_ok + 1][0]
        return _bisect(evaluate, meets, a, b, want_low=False), "largest"
    raise UsageError("every value in range meets the target: the question does not constrain it",
                     hint="ask for the target instead, or give tighter bounds")


def _bisect(evaluate: Any, meets: Any, a: float, b: float, want_low: bool) -> float:
    """``want_low``: a fails, b meets -> smallest meeting. else: a meets, b fails -> largest meeting."""
    for _ in range(200):
        mid = 0.5 * (a + b)
        if abs(b - a) <= 1e-13 * max(abs(mid), 1e-300):
            break
        good = meets(evaluate(mid))
        if want_low:
            if good:
                b = mid
            else:
                a = mid
        else:
            if good:
                a = mid
            else:
                b = mid
    return b if want_low else a
