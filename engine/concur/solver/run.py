"""Running one compiled question: plan (cached), run, and check what the givens over-determine.

:func:`run_question` is the unit every consumer repeats: the direct answer once, a goal seek for
each trial value, the sweep for each point it cannot vectorise. With ``check``, redundant
equations compare what the givens imply with what was given ("users=60 contradicts
llm_memory.yaml:40: the model gives 55") and the packs' constraints are tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..compiled import compiled
from ..errors import ContradictionError, InfeasibleError, UsageError
from ..lang.expr import Call, Var, compile_node, names_in
from ..lang.model import Model
from ..lang.pack import Constraint
from .blocks import render_template, run_plan
from .plan import Plan, Step, make_plan
from .problem import SpecialisedEq, evaluate
from .roots import close
from .solution import show_value

__all__ = ["check_constraints", "pack_defaults", "run_question"]


def run_question(
    model: Model,
    known: Mapping[str, float],
    targets: tuple[str, ...],
    sources: Mapping[str, str],
    check: bool = True,
    relax: frozenset[int] = frozenset(),
    at_least: frozenset[int] = frozenset(),
    trace: bool = True,
) -> tuple[Plan, dict[str, float], list[Step]]:
    """Plan (cached) and run ``targets`` from ``known``: (plan, values, trace kept for display).

    With ``check``, over-determined givens are compared with what the model gives and the packs'
    constraints are tested (raising Contradiction/InfeasibleError). ``relax``: see
    :func:`concur.solver.plan.make_plan`. ``at_least``: rounding equations ``n = ceil(e)`` checked as
    requirements, ``n >= ceil(e)`` (``n <= floor(e)``): a goal seek chose more than they ask.
    ``trace=False`` records no steps (the list is empty): a goal seek's trial wants the values.
    """
    plan = make_plan(model, known, targets, relax)
    if check:
        check_constraints(model, known, inputs_only=True)
    env, steps = run_plan(plan, known, sources, trace=trace)
    steps = [s for s in steps if s.variable in plan.relevant]
    if check:
        for i in plan.checks:
            e = plan.eqs[i]
            if i in at_least and _requirement_met(e, env):
                continue
            if _rounding(e) and e.lhs.name in sources:  # type: ignore[attr-defined]
                _requirement(model, e, env)
                continue
            _consistency(model, e, env, sources)
        check_constraints(model, env)
    return plan, env, steps


def _constraint_checks(model: Model) -> tuple[tuple[Constraint, frozenset[str], Any], ...]:
    """Each pack constraint with the names it reads and its compiled test, built once per model
    (every checked run tests them)."""
    return compiled(model.key).once(
        "run.constraints", lambda: tuple((c, names_in(c.expr), compile_node(c.expr)) for c in model.constraints)
    )


def pack_defaults(model: Model) -> Mapping[str, float]:
    """Every variable's pack default (base units; a choice's index), built once per model: what an
    answer takes for a name nobody gave, so an input check can see it before any plan applies it."""
    return compiled(model.key).once(
        "run.defaults", lambda: {n: float(v.default) for n, v in model.variables.items() if v.default is not None}
    )


def check_constraints(model: Model, env: Mapping[str, float], inputs_only: bool = False) -> None:
    """Test the packs' constraints whose names ``env`` all holds (only those marked ``input`` when
    ``inputs_only``: the givens alone, before any equation runs, so a bad input is named before a
    value derived from it leaves its bounds). An input constraint raises UsageError, any other
    InfeasibleError."""
    for con, names, holds in _constraint_checks(model):
        if (inputs_only and not con.input) or not names <= env.keys():
            continue
        try:
            ok = holds(env if isinstance(env, dict) else dict(env))
        except (ArithmeticError, ValueError):
            ok = False
        if not ok:
            detail = ", ".join(f"{n}={show_value(model, n, env[n])}" for n in sorted(names))
            message = (
                render_template(con.violation, model, dict(env))
                if con.violation
                else f"'{con.text}' does not hold ({detail}): {con.doc}"
            )
            if con.input:
                raise UsageError(message, where=con.where)
            raise InfeasibleError(message, where=con.where, constraint=con.text)


def _requirement_met(e: SpecialisedEq, env: dict[str, float]) -> bool:
    """``n = ceil(e)`` read as ``n >= ceil(e)``, ``n = floor(e)`` as ``n <= floor(e)``."""
    try:
        lhs, rhs = evaluate(e.lhs, env), evaluate(e.rhs, env)
    except (ArithmeticError, ValueError):
        return False
    ceil = isinstance(e.rhs, Call) and e.rhs.fn == "ceil"
    return lhs >= rhs if ceil else lhs <= rhs


def _rounding(e: SpecialisedEq) -> bool:
    return isinstance(e.lhs, Var) and isinstance(e.rhs, Call) and e.rhs.fn in ("ceil", "floor")


def _requirement(model: Model, e: SpecialisedEq, env: dict[str, float]) -> None:
    """A given count against its rounding equation: ``replicas = ceil(x)`` with replicas given asks
    for at least ceil(x) (more replicas than needed are allowed); ``users = floor(x)``, at most."""
    if _requirement_met(e, env):
        return
    name = e.lhs.name  # type: ignore[attr-defined]
    given, needed = show_value(model, name, evaluate(e.lhs, env)), show_value(model, name, evaluate(e.rhs, env))
    if isinstance(e.rhs, Call) and e.rhs.fn == "ceil":
        raise InfeasibleError(
            f"{name}={given} is too few: with it, '{e.eq.text}' asks for {needed}",
            where=e.eq.where,
            variable=name,
            hint=f"give {name} of at least {needed}, or ask for it",
            kind="ask_for",
        )
    raise InfeasibleError(
        f"{name}={given} is too many: with it, '{e.eq.text}' gives {needed}",
        where=e.eq.where,
        variable=name,
        hint=f"give {name} of at most {needed}, or ask for it",
        kind="ask_for",
    )


def _consistency(model: Model, e: SpecialisedEq, env: dict[str, float], sources: Mapping[str, str]) -> None:
    try:
        lhs, rhs = evaluate(e.lhs, env), evaluate(e.rhs, env)
    except (ArithmeticError, ValueError) as exc:
        known = ", ".join(f"{n}={show_value(model, n, env[n])}" for n in sorted(e.names) if n in env)
        raise InfeasibleError(
            f"'{e.eq.text}' cannot be evaluated with these givens ({known}): {exc}",
            where=e.eq.where,
            hint="check the givens for a zero",
        ) from None
    if close(lhs, rhs):  # over-determined givens agree within the policy's CHECK_REL
        return
    if isinstance(e.lhs, Var):
        name = e.lhs.name
        var = model.variables[name]
        if name in sources and var.limit:
            ok = lhs <= rhs if var.limit == "at_least" else lhs >= rhs
            if ok:
                return
            word = "at least" if var.limit == "at_least" else "at most"
            raise InfeasibleError(
                f"the target {name} {word} {show_value(model, name, lhs)} is not met: the model gives "
                f"{show_value(model, name, rhs)} ('{e.eq.text}')",
                where=e.eq.where,
                variable=name,
            )
        raise ContradictionError(
            f"your {name}={show_value(model, name, lhs)} contradicts '{e.eq.text}': the model gives "
            f"{show_value(model, name, rhs)}",
            where=e.eq.where,
            variable=name,
            hint="drop one of the over-determining givens, or correct it",
        )
    raise ContradictionError(
        f"the givens contradict '{e.eq.text}': {lhs:.6g} vs {rhs:.6g} (base units)",
        where=e.eq.where,
        hint="drop one of the over-determining givens",
    )
