"""Every answer checked before it is printed: the values substituted back into the model.

Whatever path gave them -- closed forms, a bracketed root, a torn loop, a goal seek -- the values of
a :class:`~concur.solver.solution.Solution` must satisfy the packs they came from. :func:`verify`
substitutes them into every equation whose names they all cover, by the numeric policy of
:mod:`concur.solver.roots`:

* an equation holds when ``|lhs - rhs| <= CHECK_REL * scale``, the scale being the largest
  magnitude among its sides and the terms they add (relative, never an absolute slack);
* a target given with a ``limit`` is a bound, never a value: ``ttft_slo = ttft`` with ttft_slo
  given holds when the model's ttft is at most it; a target the model computes is compared with
  the one given in its sense;
* a rounded count ``n = ceil(e)`` that was given or searched holds as a requirement
  (``n >= ceil(e)``; ``n <= floor(e)`` for floor), else exactly;
* an integer variable holds a whole number.

A failure is an :class:`~concur.errors.InfeasibleError` (exit 3) naming the equation and both
sides: an answer that does not check is not printed. This is a safety net behind the solver's own
checks; a shipped question that reaches it is a solver bug to fix, and the differential fuzz
(tests/solver/test_fuzz_every_pack.py) solves answers back the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..errors import InfeasibleError
from ..lang.expr import Bin, Call, Neg, Node, Var, compile_node, names_in
from ..lang.model import Model
from .roots import CHECK_REL, TINY, is_whole, within
from .solution import show_value

__all__ = ["residual_ok", "verify"]


def _scale(node: Node, env: Mapping[str, float]) -> float:
    """The largest magnitude among the terms ``node`` adds (the scale of its rounding error)."""
    if isinstance(node, Bin) and node.op in "+-":
        return max(_scale(node.left, env), _scale(node.right, env))
    if isinstance(node, Neg):
        return _scale(node.arg, env)
    try:
        value = abs(float(compile_node(node)(dict(env))))
    except (ArithmeticError, ValueError, KeyError, TypeError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def residual_ok(lhs_node: Node, rhs_node: Node, env: Mapping[str, float]) -> bool | None:
    """Whether ``lhs = rhs`` holds on ``env`` by the policy (None: it cannot be evaluated there)."""
    try:
        lhs, rhs = float(compile_node(lhs_node)(dict(env))), float(compile_node(rhs_node)(dict(env)))
    except (ArithmeticError, ValueError, KeyError, TypeError):
        return None
    if not (math.isfinite(lhs) and math.isfinite(rhs)):
        return None
    scale = max(abs(lhs), abs(rhs), _scale(lhs_node, env), _scale(rhs_node, env), TINY)
    return abs(lhs - rhs) <= CHECK_REL * scale


def verify(
    model: Model,
    values: Mapping[str, float],
    given: Mapping[str, float],
    limits: Mapping[str, str],
    chosen: frozenset[str] = frozenset(),
) -> None:
    """Raise :class:`InfeasibleError` unless ``values`` satisfy ``model`` (see the module essay).

    ``given``: the values the user gave (base units); ``limits``: given names that are targets
    (at_least/at_most); ``chosen``: counts a search picked, held to their rounding as requirements.
    """
    env = dict(values)
    for name, value in env.items():
        var = model.variables.get(name)
        if var is not None and var.integer and not is_whole(value):
            raise InfeasibleError(
                f"no answer: {name} would be {show_value(model, name, value)}, not a whole number",
                variable=name,
                hint="the givens ask for a fraction of a whole count: check them, or ask for another variable",
            )
    for g, sense in limits.items():
        if g in env and g in given and env[g] != given[g] and not within(env[g], given[g], sense):
            word = "at least" if sense == "at_least" else "at most"
            raise InfeasibleError(
                f"no answer: the target {g} {word} {show_value(model, g, given[g])} is not met "
                f"(the answer gives {show_value(model, g, env[g])})",
                variable=g,
            )
    for eq in model.equations:
        if not names_in(eq.lhs) | names_in(eq.rhs) <= env.keys():
            continue
        lhs = eq.lhs.name if isinstance(eq.lhs, Var) else None
        if lhs is not None and lhs in limits and lhs in given:
            ok: bool | None = _bound_holds(eq.rhs, env, given[lhs], limits[lhs])
        elif (
            lhs is not None
            and (lhs in given or lhs in chosen)
            and isinstance(eq.rhs, Call)
            and eq.rhs.fn in ("ceil", "floor")
        ):
            ok = _requirement_holds(eq.rhs, env, env[lhs])
        else:
            ok = residual_ok(eq.lhs, eq.rhs, env)
        if ok is False:
            raise InfeasibleError(
                f"no answer: the values found do not satisfy '{eq.text}' ({_sides(eq.lhs, eq.rhs, env)})",
                where=eq.where,
                hint="the givens may contradict each other, or the search found no true root: check them",
            )


def _bound_holds(rhs: Node, env: Mapping[str, float], target: float, sense: str) -> bool | None:
    try:
        value = float(compile_node(rhs)(dict(env)))
    except (ArithmeticError, ValueError, KeyError, TypeError):
        return None
    return within(value, target, sense) if math.isfinite(value) else None


def _requirement_holds(rhs: Call, env: Mapping[str, float], have: float) -> bool | None:
    try:
        need = float(compile_node(rhs)(dict(env)))
    except (ArithmeticError, ValueError, KeyError, TypeError):
        return None
    return within(have, need, "at_least" if rhs.fn == "ceil" else "at_most") if math.isfinite(need) else None


def _sides(lhs: Node, rhs: Node, env: Mapping[str, float]) -> str:
    try:
        return f"{float(compile_node(lhs)(dict(env))):.6g} vs {float(compile_node(rhs)(dict(env))):.6g} in base units"
    except (ArithmeticError, ValueError, KeyError, TypeError):
        return "cannot be evaluated"
