"""Answering one question: any variable from any sufficient set of givens.

How a question is answered:

1. **Givens** are resolved to base-unit floats (:mod:`concur.solver.givens`): presets expand
   catalog entries, explicit values override presets, a bare number is in the display unit.
2. **Search or plan.** A given declared ``limit: at_least/at_most`` (users, budget, service
   level) is a target to meet, not an equality; when the asked variable lies upstream of such a
   target, or the path to it goes through ``floor``/``ceil``/an integer, the question is a goal
   seek (:mod:`concur.solver.goal_seek`). Otherwise it compiles into a
   :class:`~concur.solver.plan.Plan` (cached) and the plan runs once (:mod:`concur.solver.blocks`).
3. **Checks**: redundant equations compare what the givens imply with what was given
   ("users=60 contradicts llm_memory.yaml:40: the model gives 55"); constraints that fail and
   values out of bounds are answers with exit 3, not crashes.

Everything runs under the solve budget (:mod:`concur.solver.budget`): an answer or a one-line
refusal within seconds. Every value carries a trace step: which equation gave it, and how.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ContradictionError, InfeasibleError, UsageError
from ..lang.check import require_checked
from ..lang.expr import Call, Var, compile_node, names_in, walk
from ..lang.model import Model
from .blocks import render_template, run_plan
from .budget import budget
from .closed_forms import save_closed_forms, smooth_in
from .givens import resolve_givens
from .plan import Plan, make_plan, plan_key
from .problem import Problem, SpecialisedEq, evaluate
from .solution import REL_TOL, Givens, Solution, Step, show_value
from .throughput_inputs import require_fixed

__all__ = ["Step", "Solution", "Givens", "solve_model", "resolve_givens", "flush_caches", "render_template",
           "run_question", "needs_search"]


def flush_caches(model: Model) -> None:
    """Write what this process learnt (closed forms, unit facts) to the cache folder: the one flush,
    called by :func:`solve_model` and the sweep; a failure only costs recomputation next time."""
    from ..lang.units import save_cache

    save_closed_forms(model)
    save_cache()


def run_question(model: Model, known: Mapping[str, float], targets: tuple[str, ...], sources: Mapping[str, str],
                 check: bool = True) -> tuple[Plan, dict[str, float], list[Step]]:
    """Plan (cached) and run ``targets`` from ``known``: (plan, values, trace kept for display).

    With ``check``, over-determined givens are compared with what the model gives and the packs'
    constraints are tested (raising Contradiction/InfeasibleError).
    """
    plan = make_plan(model, known, targets)
    env, trace = run_plan(plan, known, sources)
    trace = [s for s in trace if s.variable in plan.relevant]
    if check:
        for i in plan.checks:
            _consistency(model, plan.eqs[i], env, sources)
        for con in model.constraints:
            if names_in(con.expr) <= env.keys():
                try:
                    ok = compile_node(con.expr)(env)
                except (ArithmeticError, ValueError):
                    ok = False
                if not ok:
                    detail = ", ".join(f"{n}={show_value(model, n, env[n])}" for n in sorted(names_in(con.expr)))
                    raise InfeasibleError(f"'{con.text}' does not hold ({detail}): {con.doc}", where=con.where)
    return plan, env, trace


def _consistency(model: Model, e: SpecialisedEq, env: dict[str, float], sources: Mapping[str, str]) -> None:
    try:
        lhs, rhs = evaluate(e.lhs, env), evaluate(e.rhs, env)
    except (ArithmeticError, ValueError) as exc:
        known = ", ".join(f"{n}={show_value(model, n, env[n])}" for n in sorted(e.names) if n in env)
        raise InfeasibleError(f"'{e.eq.text}' cannot be evaluated with these givens ({known}): {exc}",
                              where=e.eq.where, hint="check the givens for a zero") from None
    if abs(lhs - rhs) <= REL_TOL * max(abs(lhs), abs(rhs), 1e-300):
        return
    if isinstance(e.lhs, Var):
        name = e.lhs.name
        var = model.variables[name]
        if name in sources and var.limit:
            ok = lhs <= rhs if var.limit == "at_least" else lhs >= rhs
            if ok:
                return
            word = "at least" if var.limit == "at_least" else "at most"
            raise InfeasibleError(f"the target {name} {word} {show_value(model, name, lhs)} is not met: the model gives "
                                  f"{show_value(model, name, rhs)} ('{e.eq.text}')", where=e.eq.where, variable=name)
        raise ContradictionError(
            f"your {name}={show_value(model, name, lhs)} contradicts '{e.eq.text}': the model gives "
            f"{show_value(model, name, rhs)}", where=e.eq.where, variable=name,
            hint="drop one of the over-determining givens, or correct it")
    raise ContradictionError(f"the givens contradict '{e.eq.text}': {lhs:.6g} vs {rhs:.6g} (base units)",
                             where=e.eq.where, hint="drop one of the over-determining givens")


def solve_model(model: Model, find: tuple[str, ...], given: Mapping[str, Any]) -> Solution:
    """Solve ``model`` for ``find`` from ``given`` (raw values or preset ids). See the module essay.

    Raises a :class:`concur.errors.ConcurError`: UsageError/UnderdeterminedError (exit 2),
    ContradictionError (1), InfeasibleError/BudgetError (3).
    """
    if not find:
        raise UsageError("nothing to solve for", hint="name at least one variable to find")
    require_checked(model)
    for name in find:
        model.variable(name)
    givens = resolve_givens(model, dict(given))
    require_fixed(model, set(given), find)
    for name in find:
        if name in givens.values and givens.sources.get(name) == "given":
            raise UsageError(f"'{name}' is both given and asked for", variable=name,
                             hint=f"drop --set {name}=... or --find {name}")
    known = {k: v for k, v in givens.values.items() if k not in find}
    sources = dict(givens.sources)
    with budget():
        seek = needs_search(model, find, known, givens)
        if seek is not None:
            from .goal_seek import search

            sol = search(model, find, known, givens, *seek)
        else:
            plan, env, trace = run_question(model, known, find, sources)
            sol = Solution(model, find, env, givens, trace, plan=plan)
    flush_caches(model)
    return sol


_SEARCH: dict[tuple[Any, ...], tuple[str, str] | None] = {}


def needs_search(model: Model, find: tuple[str, ...], known: Mapping[str, float],
                 givens: Givens) -> tuple[str, str] | None:
    """(asked variable, given goal) when the answer must be searched for rather than computed.

    Two cases: the asked variable lies upstream of a given target (``limit:``), or reaching it
    would invert a floor/ceil or produce an integer from a continuous relation. The goal is the
    given whose removal leaves the asked variable free while the goal follows from it; rounded
    counts (users, replicas) and integers are preferred as goals. Structural: cached per shape.
    """
    key = (plan_key(model, known, find), tuple(sorted(givens.limits.items())),
           tuple(sorted(k for k, s in givens.sources.items() if s == "given")))
    if key in _SEARCH:
        return _SEARCH[key]
    answer = _needs_search(model, find, known, givens)
    _SEARCH[key] = answer
    return answer


def _needs_search(model: Model, find: tuple[str, ...], known: Mapping[str, float],
                  givens: Givens) -> tuple[str, str] | None:
    limits = [g for g in givens.limits if g in known]

    def determined(names: Mapping[str, float], target: str) -> bool:
        return target in names or target in Problem(model, dict(names), (target,)).matching.determined

    def without(*drop: str) -> dict[str, float]:
        return {k: v for k, v in known.items() if k not in drop}

    computed = {eq.lhs.name for eq in model.equations if isinstance(eq.lhs, Var)}
    for x in find:
        for g in limits:  # x upstream of a target: search the input that drives it
            base = without(g)
            if determined(base, x):
                continue
            free = Problem(model, base, find).matching.undetermined - {g}
            candidates = sorted(
                (s for s in free | {x} if not model.variables[s].choices and (s == x or s not in computed)),
                key=lambda s: (not (model.variables[s].integer and s not in computed), s != x, s))
            for s in candidates:
                probe = {**base, s: 1.0}
                if determined(probe, g) and determined(probe, x):
                    return s, g
        if model.variables[x].choices:
            continue
        whole = Problem(model, dict(known), find)
        if x in whole.matching.determined and not _invertible_path(model, whole, x):
            drivers = sorted((g for g in known if givens.sources.get(g) == "given" and g not in limits),
                             key=lambda g: (not _rounded_output(model, g), not model.variables[g].integer))
            for g in drivers:  # the given whose removal frees x, and that x drives
                if not determined(without(g, *limits), x) and determined({**without(g), x: 1.0}, g):
                    return x, g
    return None


def _rounded_output(model: Model, name: str) -> bool:
    """``name = floor(...)`` or ``name = ceil(...) + 1``: a count the model rounds (users, replicas)."""
    return any(isinstance(eq.lhs, Var) and eq.lhs.name == name
               and any(isinstance(n, Call) and n.fn in ("floor", "ceil") for n in walk(eq.rhs))
               for eq in model.equations)


def _invertible_path(model: Model, problem: Problem, x: str) -> bool:
    """Whether x's block can be solved directly (forward evaluation or smooth inversion)."""
    m = problem.matching
    i = m.var_to_eq.get(x)
    if i is None:
        return True
    e = problem.eqs[i]
    if isinstance(e.lhs, Var) and e.lhs.name == x and x not in names_in(e.rhs):
        return True
    if model.variables[x].integer:
        return False
    return smooth_in(e.lhs, x) and smooth_in(e.rhs, x) and _upstream_smooth(problem, x)


def _upstream_smooth(problem: Problem, x: str) -> bool:
    """x is computed by inverting equations: every equation on the way must be smooth in what it inverts."""
    m = problem.matching
    seen: set[str] = set()
    stack = [x]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        i = m.var_to_eq.get(v)
        if i is None:
            continue
        e = problem.eqs[i]
        if not (isinstance(e.lhs, Var) and e.lhs.name == v):
            if not (smooth_in(e.lhs, v) and smooth_in(e.rhs, v)):
                return False
        stack.extend(n for n in e.names if n != v and n not in problem.known)
    return True
