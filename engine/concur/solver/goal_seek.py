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
wide; continuous unknowns are bracketed and bisected to :data:`~concur.solver.roots.STEP_REL` relative.
The search assumes the goal is monotone in ``x`` over the bounds; the trace
says which value was chosen and what it gives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import BudgetError, ConcurError, InfeasibleError, UsageError
from ..lang.expr import Call, Var, compile_node, names_in, to_text, walk
from ..lang.model import Model
from ..records import record
from . import integers as frontier
from .budget import spend
from .givens import Givens
from .plan import Method, Step
from .roots import GOAL_SEEK_HIGH, NUDGE_REL, STEP_REL, TINY, within
from .run import run_question
from .seek import rounding_equation
from .solution import Solution, show_value

__all__ = ["Goal", "goal_sense", "goals_for", "search", "search_via"]


@record
class Goal:
    """One thing the searched value must achieve: ``name`` reaches ``target`` in ``sense``
    (at_least, at_most, equal); or, when ``equation`` is set, the searched integer's own
    ``x = ceil(...)`` holds as a requirement (``ceil(...) <= x``; for floor, a capacity ``>= x``)."""

    name: str
    sense: str
    target: float = math.nan
    equation: int | None = None


def goal_sense(model: Model, goal: str) -> str:
    """How a search meets ``goal``: ``at_least``, ``at_most`` or ``equal`` (read-only; the Excel
    exporter prints the same test into its candidate tables)."""
    return model.variables[goal].limit or _implied_sense(model, goal)


def goals_for(model: Model, known: Mapping[str, float], names: tuple[str, ...]) -> list[Goal]:
    """The goals for given targets ``names`` (their declared limit, else the one their rounding implies)."""
    return [Goal(g, goal_sense(model, g), known[g]) for g in names]


def search(
    model: Model,
    find: tuple[str, ...],
    known: dict[str, float],
    givens: Givens,
    x: str,
    names: tuple[str, ...],
    requirement: int | None = None,
    held: tuple[str, ...] = (),
) -> Solution:
    """The smallest (or largest) ``x`` meeting every goal in ``names`` (given targets) and, with
    ``requirement``, the rounding equation that defines ``x`` (replicas inside an SLA search).
    ``held``: given counts that stay values, each held to its own rounding as a requirement (the
    largest rate 3 replicas carry within an ITL target: ``ceil(...) <= 3`` and ITL at 3 replicas)."""
    xv = model.variables[x]
    goals = goals_for(model, known, names)
    if requirement is not None:
        rhs = model.equations[requirement].rhs
        ceil = any(isinstance(n, Call) and n.fn == "ceil" for n in walk(rhs))
        goals.append(Goal(x, "at_most" if ceil else "at_least", math.nan, requirement))
    held_eqs = {n: i for n in held if (i := rounding_equation(model, n)) is not None}
    for count, i in held_eqs.items():
        ceil = any(isinstance(c, Call) and c.fn == "ceil" for c in walk(model.equations[i].rhs))
        goals.append(Goal(count, "at_most" if ceil else "at_least", math.nan, i))
    base_known = {k: v for k, v in known.items() if k not in names}
    targets = tuple(g.name for g in goals if g.equation is None)
    sources = dict(givens.sources)
    last_error: list[ConcurError] = []

    def evaluate(value: float, constraints: bool = True) -> dict[str, float] | None:
        spend(x, f"give {x} directly, or a bound on it")
        try:
            plan, env, _ = run_question(
                model, {**base_known, x: value}, targets or (x,), sources, check=False, trace=False
            )
            for g in goals:
                if g.equation is not None:
                    try:
                        env[f"{g.name}@requirement"] = compile_node(plan.eqs[g.equation].rhs)(env)
                    except KeyError:
                        if g.name == x:
                            raise
                        return None  # the plan did not reach the held count's requirement
        except ConcurError as exc:
            if isinstance(exc, BudgetError):
                raise
            last_error[:] = [exc]
            return None
        except (ArithmeticError, ValueError, KeyError):
            return None
        for con in model.constraints if constraints else ():  # a trial breaking one is no candidate
            names = names_in(con.expr)
            if names <= env.keys() and (x in names or not names <= base_known.keys()):
                try:
                    ok = compile_node(con.expr)(env)
                except (ArithmeticError, ValueError):
                    ok = False
                if not ok:
                    last_error[:] = [InfeasibleError(f"'{con.text}' does not hold: {con.doc}", where=con.where)]
                    return None
        return env

    def met(g: Goal, env: dict[str, float]) -> bool:
        if g.equation is not None:
            return within(env[f"{g.name}@requirement"], env[g.name], g.sense)
        return within(env[g.name], g.target, g.sense)

    def meets(env: dict[str, float] | None) -> bool:
        return env is not None and all(met(g, env) for g in goals)

    lo, hi = xv.bounds
    if xv.integer:
        lo_i = math.ceil(lo) if lo is not None else (1 if (hi is None or hi >= 1) else 0)
        hi_i = math.floor(hi) if hi is not None else 1 << 40
        # a count searched against its own ceil (replicas inside an SLA search) is the fewest that do
        fewest = requirement is not None and any(
            g.equation == requirement and g.name == x and g.sense == "at_most" for g in goals
        )
        exact = [g for g in goals if g.sense == "equal" and g.equation is None]
        if exact and len(goals) == 1:
            chosen = _integer_exact(evaluate, meets, exact[0], lo_i, hi_i)
            if chosen is not None and chosen[1] == "between":
                g, n = exact[0], int(chosen[0])
                below, at = evaluate(float(n - 1)), evaluate(float(n))
                shown = [
                    f"{show_value(model, x, float(k))} gives {show_value(model, g.name, e[g.name])}"
                    for k, e in ((n - 1, below), (n, at))
                    if e is not None and k >= lo_i
                ]
                raise InfeasibleError(
                    f"no whole {x} gives {g.name} exactly {show_value(model, g.name, g.target)}: " + ", ".join(shown),
                    variable=g.name,
                    hint=f"give a {g.name} one of those values reach, or ask for {g.name}",
                )
        else:
            chosen = _integer_search(
                evaluate, meets, lo_i, hi_i, fewest=fewest, improving=lambda: _improving(evaluate, goals, x, lo_i, hi_i)
            )
            if chosen is not None and chosen[1] == "smallest" and xv.bounds[1] is None and chosen[0] >= hi_i:
                raise InfeasibleError(  # the search's own limit, not a bound of the variable
                    f"no {x} below {show_value(model, x, float(hi_i))} gives {_describe(model, goals)}: the search "
                    f"stopped at its range edge, not at an answer",
                    variable=x,
                    hint="relax the target, or change another given",
                )
            if chosen is not None and chosen[1] == "edge":
                raise InfeasibleError(
                    f"every {x} from {show_value(model, x, float(lo_i))} to the end of its search range "
                    f"({show_value(model, x, float(hi_i))}) gives {_describe(model, goals)}: the search "
                    f"stopped at its range edge, not at an answer",
                    variable=x,
                    hint=f"the givens do not bound {x}: give it directly, or check them for a contradiction",
                )
    else:
        try:
            chosen = _boundary(model, goals, base_known, x, sources, evaluate, meets)
            if chosen is None:
                lo_f = lo if lo is not None and lo > 0 else None
                chosen = _continuous_search(evaluate, meets, lo_f, hi, xv.default)
                if chosen is _UNCONSTRAINED:
                    raise UsageError(
                        f"every {x} in its range gives {_describe(model, goals)}: the question does not constrain {x}",
                        variable=x,
                        hint=f"give {x} directly and ask for {', '.join(g.name for g in goals)} instead, or "
                        f"give a tighter target",
                    )
        except BudgetError as exc:  # say what was searched, not which inner loop the clock stopped in
            raise BudgetError(
                f"could not find the {x} giving {_describe(model, goals)} within the solve budget: "
                f"every trial {x} re-solves the model ({exc.message})",
                hint=f"give {x} directly and ask for {', '.join(g.name for g in goals)} instead",
                variable=x,
            ) from None
    if chosen is None:
        raise _out_of_reach(model, x, goals, evaluate, met, lo, hi, last_error)
    value, direction = chosen
    plan, env, trace = run_question(
        model,
        {**base_known, x: value},
        tuple(dict.fromkeys(find + targets)),
        sources,
        at_least=frozenset(i for i in (requirement, *held_eqs.values()) if i is not None),
    )
    note = f"{direction} {x} giving {_describe(model, goals, env)}"
    if xv.integer and len(goals) > 1 and direction == "smallest":
        before = evaluate(value - 1, constraints=False)  # which goals bind, whatever else fails
        binding = [g for g in goals if before is None or not met(g, before)]
        if binding and len(binding) < len(goals):
            note += f"; what binds: {', '.join(_name(g) for g in binding)}"
    trace = [s for s in trace if s.variable != x]
    trace.insert(0, Step(x, value, Method.SEARCH, None, note))
    return Solution(model, find, dict(env), givens, trace, notes=[note], plan=plan)


def search_via(
    model: Model,
    find: tuple[str, ...],
    known: dict[str, float],
    givens: Givens,
    x: str,
    names: tuple[str, ...],
    via: str,
    later: tuple[str, ...] = (),
) -> Solution:
    """``x`` against targets ``names`` that depend on it only through the rounded count ``via``: the
    count first (the most -- or fewest -- replicas a budget allows, a search that never touches ``x``),
    then ``x`` against that count (the largest rate those replicas carry, solved at the edge of their
    ceil). The answer meets the targets and names the count that links them."""
    counted = search(model, (via,), {k: v for k, v in known.items() if k != x and k not in later}, givens, via, names)
    count = counted.values[via]
    rest = {k: v for k, v in known.items() if k not in names}
    linked = Givens(
        {**givens.values, via: count},
        {**givens.sources, via: "given"},
        {k: v for k, v in givens.limits.items() if k not in names},
        dict(givens.texts),
        list(givens.notes),
        dict(givens.presets),
    )
    if later:  # targets at that count too (SLAs): the count stays a value, held to its rounding
        sol = search(model, find, {**rest, via: count}, linked, x, later, held=(via,))
    else:
        sol = search(model, find, {**rest, via: count}, linked, x, (via,))
    step = next(s for s in counted.trace if s.variable == via)
    sol.trace[:] = [step, *(s for s in sol.trace if s.variable != via)]
    sol.notes.insert(0, step.note or "")
    sol.givens = givens
    return sol


def _distance(goals: list[Goal], env: dict[str, float]) -> float:
    """How far ``env`` is from the targets it misses (sum of |log(value / target)|; inf if unusable)."""
    total = 0.0
    for g in goals:
        v, t = env.get(g.name, math.nan), g.target
        if not (v > 0 and t > 0):
            return math.inf
        total += abs(math.log(v / t))
    return total


def _out_of_reach(
    model: Model,
    x: str,
    goals: list[Goal],
    evaluate: Any,
    met: Any,
    lo: float | None,
    hi: float | None,
    last_error: list[ConcurError],
) -> InfeasibleError:
    """Why no value of ``x`` meets the goals: each given target with the best it gets at the ends
    of ``x``'s range ("itl_slo at most 20 ms is out of reach: itl is 21.7 ms at 1,000,000 replicas")."""
    ends = [
        e
        for e in (hi if hi is not None else GOAL_SEEK_HIGH, lo if lo is not None and lo > 0 else None)
        if e is not None
    ]
    tried = []
    for end in ends:
        env = evaluate(float(end))
        if env is None:
            continue
        missed = [g for g in goals if g.equation is None and not met(g, env)]
        if missed:
            tried.append((_distance(missed, env), end, env, missed))
    for _, end, env, missed in sorted(tried, key=lambda t: t[0])[:1]:  # the end nearest the goals
        if missed:
            parts = []
            for g in missed:
                source = next(
                    (
                        eq.rhs
                        for eq in model.equations
                        if isinstance(eq.lhs, Var) and eq.lhs.name == g.name and isinstance(eq.rhs, Var)
                    ),
                    None,
                )
                shown = source.name if isinstance(source, Var) else g.name
                parts.append(
                    f"{g.name} {_WORD[g.sense]} {show_value(model, g.name, g.target)} is out of reach: "
                    f"{shown} is {show_value(model, g.name, env[g.name])} at {x} = "
                    f"{show_value(model, x, float(end))}"
                )
            return InfeasibleError(
                "; ".join(parts),
                variable=missed[0].name,
                hint=f"no {x} in its range meets it: relax the target, or change the configuration",
            )
    why = f"; {last_error[0].render_body()}" if last_error else ""
    return InfeasibleError(
        f"no {x} within its bounds gives {_describe(model, goals)}{why}",
        variable=x,
        hint="relax the target, or change another given",
    )


def _boundary(
    model: Model, goals: list[Goal], known: dict[str, float], x: str, sources: dict[str, str], evaluate: Any, meets: Any
) -> tuple[float, str] | None:
    """The exact edge of a rounded goal, solved rather than searched.

    ``replicas = ceil(e)`` stays at most R exactly while ``e <= R``, so the largest rate R replicas
    carry is where ``e = R``: the plan is compiled with that equation read without its rounding and
    solved for ``x`` directly (a loop or a bracket, but no search). The edge is kept only when the
    real, rounded model meets the goal there; which side holds says smallest or largest. None when
    this does not apply or does not work (the caller then searches).
    """
    if len(goals) != 1 or goals[0].equation is not None:
        return None
    g = goals[0]
    i = rounding_equation(model, g.name)
    if i is None or g.sense == "equal":
        return None
    try:
        _plan, env, _ = run_question(
            model, {**known, g.name: g.target}, (x,), sources, check=False, relax=frozenset({i}), trace=False
        )
    except ConcurError as exc:
        if isinstance(exc, BudgetError):
            raise
        return None
    edge = env.get(x)
    if edge is None or not math.isfinite(edge) or not meets(evaluate(edge)):
        return None
    return edge, "smallest" if meets(evaluate(edge * (1 + NUDGE_REL))) else "largest"


_WORD = {"at_least": "at least", "at_most": "at most", "equal": "exactly"}


def _name(g: Goal) -> str:
    return f"the {g.name} requirement" if g.equation is not None else g.name


def _describe(model: Model, goals: list[Goal], env: dict[str, float] | None = None) -> str:
    parts = []
    for g in goals:
        if g.equation is not None:
            text = f"{g.name} {'>=' if g.sense == 'at_most' else '<='} {to_text(model.equations[g.equation].rhs)}"
            if env is not None and f"{g.name}@requirement" in env:
                text += f" (= {env[f'{g.name}@requirement']:.6g})"
            parts.append(text)
            continue
        text = f"{g.name} {_WORD[g.sense]} {show_value(model, g.name, g.target)}"
        if env is not None and g.name in env:
            text += f" (it gives {show_value(model, g.name, env[g.name])})"
        parts.append(text)
    return " and ".join(parts)


def _implied_sense(model: Model, goal: str) -> str:
    """A goal without a declared limit: a ``ceil`` output is a requirement (at most the given count:
    the replicas you have), a ``floor`` output a capacity (at least: the users you need)."""
    for eq in model.equations:
        if isinstance(eq.lhs, Var) and eq.lhs.name == goal:
            rounding = {n.fn for n in walk(eq.rhs) if isinstance(n, Call) and n.fn in ("ceil", "floor")}
            if rounding == {"ceil"}:
                return "at_most"
            if rounding == {"floor"}:
                return "at_least"
    return "equal"


def _margins(goals: list[Goal], env: dict[str, float], x: str) -> list[float]:
    """How far ``env`` clears each goal (positive: met with room; larger is better)."""
    out = []
    for g in goals:
        if g.equation is not None:
            need, have = env[f"{g.name}@requirement"], env[g.name]
            out.append(have - need if g.sense == "at_most" else need - have)
        elif g.sense == "at_least":
            out.append(env[g.name] - g.target)
        elif g.sense == "at_most":
            out.append(g.target - env[g.name])
        else:
            out.append(-abs(env[g.name] - g.target))
    return out


def _improving(evaluate: Any, goals: list[Goal], x: str, lo: int, hi: int) -> bool:
    """Whether the goals get no worse, and one better, from ``lo`` to the next whole value that
    changes them (within 64): then the smallest value meeting them is the answer, not the largest
    (more servers only raise a service level: the fewest that meet it, not the most)."""
    start = evaluate(float(lo))
    if start is None:
        return False
    before = _margins(goals, start, x)
    for n in range(lo + 1, min(hi, lo + 64) + 1):
        env = evaluate(float(n))
        if env is None:
            continue
        after = _margins(goals, env, x)
        if after != before:
            return all(b >= a for a, b in zip(before, after))
    return False


def _integer_search(
    evaluate: Any, meets: Any, lo: int, hi: int, *, fewest: bool = False, improving: Any = None
) -> tuple[float, str] | None:
    """Smallest n meeting the goal when it fails at ``lo``; largest n meeting it when it holds at ``lo``
    -- unless ``fewest`` or ``improving()``: a count that only gets better as it grows (replicas,
    servers for a service level), whose answer is the smallest n meeting the goal, ``lo`` included.
    A largest that is ``hi`` itself is no frontier but the end of the search range: ``(hi, "edge")``.

    Values that break a constraint (``evaluate`` returns None) are skipped, never taken.
    """

    def goal(n: int) -> bool | None:
        value = evaluate(float(n))
        return None if value is None else bool(meets(value))

    at_lo = goal(lo)
    if at_lo is True and (fewest or (improving is not None and improving())):
        return float(lo), "smallest"
    if at_lo is True:
        best = frontier.largest(goal, lo, hi)
        if best is not None and best >= hi and hi > lo:
            return float(hi), "edge"
        return None if best is None else (float(best), "largest")
    first = frontier.smallest(goal, lo, hi)
    return None if first is None else (float(first), "smallest")


def _integer_exact(evaluate: Any, meets: Any, goal: Goal, lo: int, hi: int) -> tuple[float, str] | None:
    """The smallest integer giving exactly ``goal``'s target (40 GPUs -> 10 replicas of 4), where the
    goal's value is monotone in it: the first integer whose value reaches the target, bisected like
    an at-least (or at-most) goal. ``(n, "between")`` when it passes the target without hitting it."""

    def value(n: int) -> float | None:
        env = evaluate(float(n))
        v = None if env is None else env.get(goal.name)
        return v if v is not None and math.isfinite(v) else None

    first = next(((n, v) for n in range(lo, min(hi, lo + 64) + 1) if (v := value(n)) is not None), None)
    if first is None:
        return None
    second = next(
        (
            (n, v)
            for n in range(first[0] + 1, min(hi, first[0] + 64) + 1)
            if (v := value(n)) is not None and v != first[1]
        ),
        None,
    )
    rising = second is None or second[1] > first[1]

    def reached(n: int) -> bool | None:
        v = value(n)
        return None if v is None else within(v, goal.target, "at_least" if rising else "at_most")

    n = frontier.smallest(reached, lo, hi)
    if n is None:
        return None
    if not meets(evaluate(float(n))):
        return float(n), "between"  # the target falls between n - 1 and n
    return float(n), "smallest"


_UNCONSTRAINED = (math.nan, "unconstrained")
"""What :func:`_continuous_search` answers when every value of its range meets the goals."""


def _continuous_search(
    evaluate: Any, meets: Any, lo: float | None, hi: float | None, start: float | None
) -> tuple[float, str] | None:
    """Bracket the goal on a doubling grid around ``start`` and bisect the bracket. The grid is walked
    outwards from ``start``, one step down and one up in turn, and the walk stops at the first point
    whose verdict differs from its neighbour's towards ``start``: the goal is assumed monotone, so that
    is the one boundary, and trials far beyond it (a rate of 10^17 requests a second, whose fleet no
    solve budget can size) are never run."""
    x0 = start if start and start > 0 else (lo * 2 if lo else 1.0)
    grid = [x0 * 2.0**k for k in range(-60, 61)]
    if lo is not None:
        grid = [g for g in grid if g >= lo] or [lo]
        grid.insert(0, lo)
    if hi is not None:
        grid = [g for g in grid if g <= hi] + [hi]
    here = min(range(len(grid)), key=lambda i: abs(math.log(grid[i] / x0)) if grid[i] > 0 else math.inf)
    verdicts: dict[int, bool] = {}

    def ok(i: int) -> bool:
        if i not in verdicts:
            verdicts[i] = bool(meets(evaluate(grid[i])))
        return verdicts[i]

    centre = ok(here)
    for step in range(1, len(grid)):
        for i, inner in ((here - step, here - step + 1), (here + step, here + step - 1)):
            if not 0 <= i < len(grid) or ok(i) == ok(inner):
                continue
            low, high = min(i, inner), max(i, inner)
            if ok(high):  # fails below, meets above: the smallest value that meets
                return _bisect(evaluate, meets, grid[low], grid[high], want_low=True), "smallest"
            return _bisect(evaluate, meets, grid[low], grid[high], want_low=False), "largest"
    return _UNCONSTRAINED if centre else None


def _bisect(evaluate: Any, meets: Any, a: float, b: float, want_low: bool) -> float:
    """``want_low``: a fails, b meets -> smallest meeting. else: a meets, b fails -> largest meeting."""
    for _ in range(200):
        mid = 0.5 * (a + b)
        if abs(b - a) <= STEP_REL * max(abs(mid), TINY):
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
