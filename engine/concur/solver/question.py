"""Answering one question: any variable from any sufficient set of givens.

How a question is answered:

1. **Givens** are resolved to base-unit floats (:mod:`concur.solver.givens`): presets expand
   catalog entries, explicit values override presets, a bare number is in the display unit.
2. **Search or plan.** A given declared ``limit: at_least/at_most`` (users, budget, service
   level) is a target to meet, not an equality; when the asked variable lies upstream of such a
   target, or the path to it goes through ``floor``/``ceil``/an integer, the question is a goal
   seek (:mod:`concur.solver.goal_seek`). Otherwise it compiles into a
   :class:`~concur.solver.plan.Plan` (cached) and the plan runs once (:mod:`concur.solver.blocks`).
3. **Checks**: the answer is substituted back into every equation it covers before it is returned
   (:mod:`concur.solver.verify`: limits as inequalities, whole counts whole); redundant equations compare what the givens imply with what was given
   ("users=60 contradicts llm_memory.yaml:40: the model gives 55"); constraints that fail and
   values out of bounds are answers with exit 3, not crashes.

Everything runs under the solve budget (:mod:`concur.solver.budget`): an answer or a one-line
refusal within seconds. Every value carries a trace step: which equation gave it, and how.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InfeasibleError, UnderdeterminedError, UsageError
from ..lang.check import require_checked
from ..lang.fallback import asked_fallbacks, following_model
from ..lang.model import Model
from ..lang.units import save_cache
from .budget import budget
from .closed_forms import save_closed_forms
from .givens import Givens, resolve_givens
from .goal_seek import search, search_via
from .plan import Method, structure
from .roots import within
from .run import check_constraints, pack_defaults, run_question
from .seek import needs_search
from .solution import Solution, show_value
from .throughput_inputs import require_fixed
from .verify import verify

__all__ = ["flush_caches", "solve_model", "targets_as_checks"]


def flush_caches(model: Model) -> None:
    """Write what this process learnt (closed forms, unit facts) to the cache folder: the one flush,
    called by :func:`solve_model` and the sweep; a failure only costs recomputation next time."""
    save_closed_forms(model)  # a no-op unless this process inverted something new
    save_cache()


def targets_as_checks(
    model: Model, known: Mapping[str, float], find: tuple[str, ...], givens: Givens
) -> tuple[str, ...]:
    """Given targets (``limit:``) that the other givens determine: they are computed and compared,
    never used as values (``mean_wait=100 s`` is a ceiling, and the mean residence is the model's
    wait plus service, not 100 s plus service)."""
    out: list[str] = []
    rest = dict(known)
    for g in sorted(givens.limits):
        if g not in rest or g in find:
            continue
        without = {k: v for k, v in rest.items() if k != g}
        if g in structure(model, without, (g,)).matching.determined:
            out.append(g)
            rest = without
    return tuple(out)


def _target_met(model: Model, name: str, value: float, target: float, sense: str) -> None:
    if not within(value, target, sense):
        word = "at least" if sense == "at_least" else "at most"
        raise InfeasibleError(
            f"the target {name} {word} {show_value(model, name, target)} is not met: the model gives "
            f"{show_value(model, name, value)}",
            variable=name,
            hint=f"relax {name}, or change another given",
        )


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
    givens = resolve_givens(model, dict(given), find)
    for key, ours, theirs in asked_fallbacks(model, given, find)[:1]:
        raise UsageError(
            f"{ours} is {theirs} while {key} is not given, and {theirs} is asked for: their choices "
            f"differ, so {ours} cannot follow the answer",
            variable=ours,
            hint=f"give {key} (or {ours})",
            kind="asked_fallback",
            field=key,
        )
    model = following_model(model, given, find)
    require_checked(model)
    require_fixed(model, given, find)
    for name in find:
        if name in givens.values and givens.sources.get(name) == "given":
            raise UsageError(
                f"'{name}' is both given and asked for",
                variable=name,
                hint="give it or ask for it, not both",
                kind="given_and_asked",
            )
    known = {k: v for k, v in givens.values.items() if k not in find}
    try:
        sol = _answer(model, find, known, givens)
    except UnderdeterminedError as exc:
        # an asked name a preset fills, that nothing given determines, is answered with the preset's
        # value; not when the solver would need another asked name given (two unknowns tied together)
        kept = [n for n in find if n in givens.values and givens.sources.get(n, "").startswith("preset ")]
        if not kept or any(m in find and m not in kept for m in exc.missing):
            raise _unlisted(exc, givens) from None
        try:
            sol = _answer(model, find, {**known, **{n: givens.values[n] for n in kept}}, givens)
        except UnderdeterminedError:
            raise _unlisted(exc, givens) from None
        sol.notes.extend(
            f"{n} = {show_value(model, n, givens.values[n])} is what {givens.sources[n][len('preset ') :]} "
            "gives: asked for, it is solved for only when a target fixes it (give one to solve it backwards)"
            for n in kept
        )
    chosen = frozenset(s.variable for s in sol.trace if s.method in (Method.SEARCH, Method.INTEGER_TEAR))
    given = {k: v for k, v in givens.values.items() if givens.sources.get(k) == "given"}
    verify(model, sol.values, given, givens.limits, chosen)
    flush_caches(model)
    return sol


def _answer(model: Model, find: tuple[str, ...], known: dict[str, float], givens: Givens) -> Solution:
    """One solve of ``find`` from ``known``: a goal seek where a target or an integer asks for one,
    else the plan run once, with the given targets compared after."""
    sources = dict(givens.sources)
    # a bad input is named before any search for the answer (with the defaults the answer would use)
    defaults = {n: v for n, v in pack_defaults(model).items() if n not in find}
    check_constraints(model, {**defaults, **known}, inputs_only=True)
    with budget():
        seek = needs_search(model, find, known, givens)
        if seek is not None and seek.via is not None:
            return search_via(model, find, known, givens, seek.variable, seek.goals, seek.via, seek.later)
        if seek is not None:
            return search(model, find, known, givens, seek.variable, seek.goals, seek.requirement, seek.held)
        targets = targets_as_checks(model, known, find, givens)
        plan, env, trace = run_question(
            model, {k: v for k, v in known.items() if k not in targets}, find + targets, sources
        )
        for g in targets:
            _target_met(model, g, env[g], known[g], givens.limits[g])
        return Solution(model, find, env, givens, trace, plan=plan)


def _unlisted(exc: UnderdeterminedError, givens: Givens) -> UnderdeterminedError:
    """A missing value that a preset would have filled but its catalog does not list (a GPU
    without a list price at the chosen provider) is named as such, not as one input among many."""
    why = [givens.unlisted[n] for n in exc.missing if n in givens.unlisted]
    if not why:
        return exc
    name = next(n for n in exc.missing if n in givens.unlisted)
    return UnderdeterminedError(
        f"{why[0]}: {exc.message}",
        missing=exc.missing,
        variable=name,
        hint="give your own price, or a provider that lists it",
        kind="unlisted_price",
    )
