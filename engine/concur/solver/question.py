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

from ..errors import UnderdeterminedError, UsageError
from ..lang.check import require_checked
from ..lang.model import Model
from ..lang.units import save_cache
from .budget import budget
from .closed_forms import save_closed_forms
from .givens import resolve_givens
from .goal_seek import search, search_via
from .run import run_question
from .seek import needs_search
from .solution import Givens, Solution
from .throughput_inputs import require_fixed

__all__ = ["flush_caches", "solve_model"]


def flush_caches(model: Model) -> None:
    """Write what this process learnt (closed forms, unit facts) to the cache folder: the one flush,
    called by :func:`solve_model` and the sweep; a failure only costs recomputation next time."""
    save_closed_forms(model)  # a no-op unless this process inverted something new
    save_cache()


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
            raise UsageError(
                f"'{name}' is both given and asked for", variable=name, hint=f"drop --set {name}=... or --find {name}"
            )
    known = {k: v for k, v in givens.values.items() if k not in find}
    sources = dict(givens.sources)
    try:
        with budget():
            seek = needs_search(model, find, known, givens)
            if seek is not None and seek.via is not None:
                sol = search_via(model, find, known, givens, seek.variable, seek.goals, seek.via)
            elif seek is not None:
                sol = search(model, find, known, givens, seek.variable, seek.goals, seek.requirement)
            else:
                plan, env, trace = run_question(model, known, find, sources)
                sol = Solution(model, find, env, givens, trace, plan=plan)
    except UnderdeterminedError as exc:
        raise _unlisted(exc, givens) from None
    flush_caches(model)
    return sol


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
        hint=f"give --set {name}=... (your own price) or --set provider=NAME (one that lists it)",
    )
