"""The solver: any variable from any sufficient set of givens.

How a question is answered (DESIGN §1):

1. **Givens** are resolved to base-unit floats: presets expand catalog entries,
   explicit values override presets, choice variables take their code.
2. ``if_`` whose condition is known is folded away, so the unused branch's
   variables are not needed (a GQA model needs no ``kv_lora_rank``).
3. **Defaults** fill in only what the givens leave undetermined, one at a time
   in declaration order, so a default never contradicts a given.
4. **Structure** (:mod:`concur.solver.structure`): matching, Dulmage–Mendelsohn,
   blocks in dependency order. Under-determined questions name what is missing.
5. **Blocks**: an equation already solved for its unknown is evaluated; otherwise
   sympy inverts it once (positive assumptions, roots filtered by bounds) and the
   inverted form is cached on disk keyed by the packs' content; loops are solved
   by sympy or numerically.
6. **Targets and integers**: a given with ``limit: at_least/at_most`` (users,
   budget, service level) is a target to meet, not an equality. When the asked
   variable lies upstream of such a target, or the path to it goes through
   ``floor``/``ceil``/an integer, the solver *searches*: it evaluates the model
   forward for candidate values and returns the smallest (or largest) one that
   meets the target, saying so in the trace.
7. **Checks**: redundant equations compare what the givens imply with what was
   given ("users=60 contradicts llm_memory.yaml:40: the model gives 55"),
   bounds violations and unmet constraints become clear answers (exit 3).

Every value in the solution carries a trace step: which equation gave it, how.
"""

from __future__ import annotations

from typing import Any

from ..errors import (
    ContradictionError,
    InfeasibleError,
    UnderdeterminedError,
    UsageError,
)
from .blocks import Executor, render_template
from ..lang.expr import Call, Var, compile_node, names_in
from .givens import resolve_givens
from .inverse import save_inverse_cache, smooth_in
from ..lang.model import Model
from .problem import Problem, SpecialisedEq, evaluate
from .solution import REL_TOL, Givens, Solution, Step, describe_var, show_value

__all__ = ["Step", "Solution", "Givens", "solve_model", "resolve_givens", "save_inverse_cache", "render_template",
           "forward", "needs_search"]


def forward(model: Model, known: dict[str, float], targets: tuple[str, ...], sources: dict[str, str],
             check: bool = True) -> Executor:
    problem = Problem(model, known, targets)
    missing = [t for t in targets if t not in problem.known and t not in problem.matching.determined]
    if missing:
        need = problem.missing()
        presets = {v for p in model.presets.values() for v in ([p.key])}
        hint = f"give {', '.join(describe_var(model, n) for n in need[:8])}" if need else \
            "the equations in play do not determine it"
        if presets:
            hint += f" (presets: {', '.join(sorted(presets))} set many at once)"
        if any(p.scenario for p in model.packs):
            hint += "; or start from the embedded scenario: --scenario default --set NAME=VALUE"
        raise UnderdeterminedError(f"cannot determine {', '.join(missing)} from the givens", missing=tuple(need),
                                   hint=hint)
    ex = Executor(model, problem, sources)
    wanted = set(t for t in targets if t not in problem.known)
    # redundant equations (over-determined givens), including those whose every variable is known
    fully_known = [i for i, e in problem.eqs.items() if e.names and e.names <= problem.known.keys()]
    checks = [i for i in problem.matching.redundant if problem.eqs[i].names <= (problem.matching.determined |
                                                                                 problem.known.keys())]
    checks += [i for i in fully_known if i not in checks]
    for i in checks:
        wanted |= set(problem.eqs[i].names) - problem.known.keys()
    ex.run(wanted)
    used = set(targets)
    for step in ex.trace:
        if step.equation:
            used.add(step.variable)
            for e in problem.eqs.values():
                if e.eq.text == step.equation:
                    used |= e.names
    ex.trace = [s for s in ex.trace if s.variable in used]
    if check:
        for i in checks:
            _consistency(model, problem.eqs[i], ex.env, sources)
        for con in model.constraints:
            if names_in(con.expr) <= ex.env.keys():
                try:
                    ok = compile_node(con.expr)(ex.env)
                except (ArithmeticError, ValueError):
                    ok = False
                if not ok:
                    detail = ", ".join(f"{n}={show_value(model, n, ex.env[n])}" for n in sorted(names_in(con.expr)))
                    raise InfeasibleError(f"'{con.text}' does not hold ({detail}): {con.doc}", where=con.where)
    return ex


def _consistency(model: Model, e: SpecialisedEq, env: dict[str, float], sources: dict[str, str]) -> None:
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


def solve_model(model: Model, find: tuple[str, ...], given: dict[str, Any]) -> Solution:
    """Solve ``model`` for ``find`` from ``given`` (raw values or preset ids). See module docstring."""
    for name in find:
        model.variable(name)
    givens = resolve_givens(model, given)
    for name in find:
        if name in givens.values and givens.sources.get(name) == "given":
            raise UsageError(f"'{name}' is both given and asked for", variable=name,
                             hint=f"drop --set {name}=... or --find {name}")
    known = {k: v for k, v in givens.values.items() if k not in find}
    sources = dict(givens.sources)

    seek = needs_search(model, find, known, givens)
    if seek is not None:
        target, goal = seek
        return _search_solution(model, find, known, givens, target, goal)
    ex = forward(model, known, find, sources)
    sol = Solution(model, find, ex.env, givens, ex.trace)
    return sol


def needs_search(model: Model, find: tuple[str, ...], known: dict[str, float],
                  givens: Givens) -> tuple[str, str] | None:
    """(asked variable, given goal) when the answer must be searched for rather than computed.

    Two cases: the asked variable lies upstream of a given target (``limit:``), or reaching it
    would invert a floor/ceil or produce an integer from a continuous relation. The goal is the
    given whose removal leaves the asked variable free while the goal follows from it; rounded
    counts (users, replicas) and integers are preferred as goals.
    """
    def drives(x: str, g: str) -> bool:
        without = {k: v for k, v in known.items() if k != g}
        return g in Problem(model, {**without, x: 1.0}, (g,)).matching.determined

    goals = [g for g in givens.limits if g in known]
    for x in find:
        for g in goals:
            without = {k: v for k, v in known.items() if k != g}
            probe = Problem(model, without, find)
            if x in probe.known or x in probe.matching.determined:
                continue  # x follows forward without the goal
            if drives(x, g):
                return x, g
        if model.variables[x].choices:
            continue
        probe = Problem(model, known, find)
        if x in probe.matching.determined and not _invertible_path(model, probe, x):
            drivers = sorted((g for g in known if givens.sources.get(g) == "given"),
                             key=lambda g: (not _rounded_output(model, g), not model.variables[g].integer))
            for g in drivers:
                if drives(x, g):
                    return x, g
    return None


def _rounded_output(model: Model, name: str) -> bool:
    """``name = floor(...)`` or ``name = ceil(...)``: a count the model rounds (users, replicas)."""
    return any(isinstance(eq.lhs, Var) and eq.lhs.name == name and isinstance(eq.rhs, Call)
               and eq.rhs.fn in ("floor", "ceil") for eq in model.equations)


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
    return smooth_in(e.lhs, x) and smooth_in(e.rhs, x) and _upstream_smooth(model, problem, x)


def _upstream_smooth(model: Model, problem: Problem, x: str) -> bool:
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


def _search_solution(model: Model, find: tuple[str, ...], known: dict[str, float], givens: Givens, x: str,
                     goal: str) -> Solution:
    from .goal_seek import search

    return search(model, find, known, givens, x, goal)
