"""Plans: a question compiled once into the steps that answer it.

How it is designed, and why
---------------------------
*Which* equation gives *which* unknown, and *how* -- forward, through a closed-form inverse, by
bracketing a root, by solving or tearing a loop -- depends on which variables are known and on
the branches their values select, never on the other values. So a question (the model, the
names given, the targets) compiles once into a frozen :class:`Plan`, and every consumer
*interprets* the same plan instead of deciding dispatch on its own:

* the scalar run (:mod:`concur.solver.blocks`) evaluates it for one set of values;
* the goal seek (:mod:`concur.solver.goal_seek`) evaluates its inner plan hundreds of times;
* the sweep (:mod:`concur.sweep.vector`) evaluates it over numpy arrays;
* the Excel exporter prints the closed forms of the steps the trace says were taken.

Compiling a plan (:func:`make_plan`):

1. :class:`~concur.solver.problem.Problem` folds ``if_`` whose condition is known, applies
   defaults where nothing else determines a variable, and matches equations to unknowns;
2. the blocks the targets need come in dependency order (:mod:`concur.solver.structure`);
3. each block becomes a :class:`BlockStep` with a :class:`~concur.solver.plan.Method`:
   ``FORWARD`` (the unknown alone on one side), ``INVERTED`` (closed forms from
   :mod:`concur.solver.closed_forms`, chosen per run by :mod:`concur.solver.roots`),
   ``NUMERIC`` (bracketed within bounds), ``LOOP`` (closed forms of the whole loop; for a loop
   of more than :data:`~concur.solver.closed_forms.SYMBOLIC_LOOP_LIMIT` equations, linear rows
   solved as a matrix on the values; sympy on the values as a last resort), ``INTEGER_TEAR``
   (a loop torn at ``n = ceil(...)``) or ``TEAR``
   (a loop torn at one variable, the rest solved one equation at a time).

Plans are cached per process (in the model's :class:`~concur.compiled.Compiled`) by ``(model key, names given, targets, values of the names that
fold an if_)``; their closed forms are cached on disk. A plan holds no values of the question,
so the same plan answers every question of its shape.

Worked example: ``llm_memory --find users`` with model, GPU and tp given compiles to eleven
``FORWARD`` steps (weights_per_gpu ... users) and no symbolic work at all; asking for
``gpu_memory`` from ``users`` instead turns ``users = floor(...)`` into a goal seek whose inner
plan is the forward one.

Non-goals: reordering for numerical stability, common-subexpression elimination.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..compiled import compiled, forget
from ..errors import UnderdeterminedError
from ..lang.expr import Call, If, Node, Var, compile_node, names_in, to_text, walk
from ..lang.model import Model
from ..records import record
from .closed_forms import (
    SYMBOLIC_LOOP_LIMIT,
    invert,  # here: a plan of forward steps never loads it
    linear_rows,
    solve_loop,
)
from .problem import Problem, SpecialisedEq, smooth_in
from .structure import Matching, blocks_in_order, dependencies, match, needed_for

if TYPE_CHECKING:
    from .closed_forms import LinearRow

__all__ = [
    "BlockStep",
    "Method",
    "Plan",
    "Step",
    "Tear",
    "conditions",
    "describe_var",
    "forget_plans",
    "make_plan",
    "plan_key",
    "structure",
]


class Method(StrEnum):
    """How a value was obtained; the one vocabulary of plans, traces, sweeps and workbooks."""

    GIVEN = "given"  # typed by the user
    PRESET = "preset"  # filled by a catalog entry (gpu=h100-sxm-80gb)
    DEFAULT = "default"  # the pack's default, where nothing else determines the variable
    FORWARD = "forward"  # the unknown stands alone on one side of its equation
    INVERTED = "inverted"  # a closed form of the equation solved for the unknown
    NUMERIC = "numeric"  # a bracketed root within the variable's bounds
    LOOP = "loop"  # an algebraic loop solved together (closed form, or sympy on the values)
    TEAR = "tear"  # a loop torn at one variable whose residual is bracketed
    INTEGER_TEAR = "integer tear"  # a loop torn at an integer n = ceil(...): the smallest n that suffices
    SEARCH = "search"  # a goal seek: the smallest/largest value meeting a target


@dataclass(frozen=True)
class Step:
    """How one value was obtained. ``value`` is in base units; ``eq`` indexes ``model.equations``
    (None for givens, presets and defaults); ``choice`` says which closed form (root, or loop
    branch) gave the value, so the Excel exporter prints the same one."""

    variable: str
    value: float
    method: Method
    eq: int | None = None
    note: str = ""
    choice: int | None = None


def describe_var(model: Model, name: str) -> str:
    var = model.variables[name]
    unit = f" [{var.display.text}]" if var.display.text else ""
    return f"{name}{unit}"


@record
class Tear:
    """One way to tear a loop: guess ``variable``, solve ``inner`` in order, and the residual of
    equation ``equation`` (TEAR) or the ceil/floor it defines (INTEGER_TEAR) decides."""

    variable: str
    equation: int
    inner: tuple[BlockStep, ...]


@record
class BlockStep:
    """One block of the plan: ``equations`` (model indices) give ``variables`` by ``method``.

    ``forms``: FORWARD ``(expression,)``; INVERTED the candidate roots (``complete``: they are
    all the roots, so none proves there is no solution). ``branches``: LOOP closed forms, one
    expression per variable per branch (empty: solve the loop with sympy on the values).
    ``linear``: LOOP of a large linear loop, one row per equation (solved as a matrix on the
    values). ``tears``: TEAR/INTEGER_TEAR ways to tear the loop, tried in order. ``reads``: the
    names the block needs.
    """

    method: Method
    equations: tuple[int, ...]
    variables: tuple[str, ...]
    reads: frozenset[str]
    forms: tuple[Node, ...] = ()
    complete: bool = True
    branches: tuple[tuple[Node, ...], ...] = ()
    tears: tuple[Tear, ...] = ()
    linear: tuple[LinearRow, ...] = ()


@record
class Plan:
    """A compiled question. ``known``: the names whose values a run supplies; ``defaults``: the
    pack defaults it applies (base units); ``eqs``: the equations specialised to the folded
    branches; ``checks``: equations to verify after the run (over-determined givens);
    ``relevant``: the names the trace keeps."""

    model: Model
    key: tuple[Any, ...]
    known: frozenset[str]
    defaults: Mapping[str, float]
    targets: tuple[str, ...]
    eqs: Mapping[int, SpecialisedEq]
    steps: tuple[BlockStep, ...]
    checks: tuple[int, ...]
    relevant: frozenset[str]
    computed: frozenset[str] = field(default=frozenset())

    def step_for(self, eq: int, method: Method) -> BlockStep | None:
        """The step of ``method`` (inside torn loops too) that solves equation ``eq``."""
        stack = list(self.steps)
        while stack:
            step = stack.pop()
            if eq in step.equations and step.method is method:
                return step
            for tear in step.tears:
                stack.extend(tear.inner)
        return None


def conditions(model: Model) -> tuple[tuple[frozenset[str], Node], ...]:
    """Every distinct ``if_`` condition of the model: (the names it reads, its expression), in the
    order :func:`plan_key` folds them."""

    def build() -> tuple[tuple[frozenset[str], Node], ...]:
        seen: dict[str, tuple[frozenset[str], Node]] = {}
        for eq in model.equations:
            for side in (eq.lhs, eq.rhs):
                for n in walk(side):
                    if isinstance(n, If):
                        seen.setdefault(to_text(n.cond), (names_in(n.cond), n.cond))
        return tuple(seen[k] for k in sorted(seen))

    return compiled(model.key).once("plan.conditions", build)


def _conditions(model: Model) -> tuple[tuple[frozenset[str], Any], ...]:
    """Every distinct ``if_`` condition of the model: (the names it reads, its compiled test)."""
    return compiled(model.key).once(
        "plan.condition_tests", lambda: tuple((names, compile_node(node)) for names, node in conditions(model))
    )


def plan_key(
    model: Model, known: Mapping[str, float], targets: tuple[str, ...], relax: frozenset[int] = frozenset()
) -> tuple[Any, ...]:
    """What a plan depends on: the model, the names known, the targets, which way every ``if_`` whose
    condition is known folds (not the values themselves: two GPUs of one family share a plan) and
    the rounding equations read without their rounding (a goal seek's boundary)."""
    folds: list[bool | None] = []
    for names, test in _conditions(model):
        if names <= known.keys():
            try:
                folds.append(bool(test(known)))
            except (ArithmeticError, ValueError):
                folds.append(None)
        else:
            folds.append(None)
    return (model.key, frozenset(known), targets, tuple(folds), relax)


def forget_plans() -> None:
    """Drop every compiled plan of this process (the next question compiles afresh): everything
    compiled, :func:`concur.compiled.forget`."""
    forget()


def structure(
    model: Model, known: Mapping[str, float], targets: tuple[str, ...], relax: frozenset[int] = frozenset()
) -> Problem:
    """The structural problem of a question (matching, defaults applied), shared by every question
    with the same :func:`plan_key`: it depends on the names known and the way each ``if_`` folds,
    never on the values. Read its structure only -- its ``known`` holds one question's values."""
    key = plan_key(model, known, targets, relax)
    problems = compiled(model.key).problems
    hit: Problem | None = problems.get(key)
    return hit if hit is not None else problems.put(key, Problem(model, dict(known), targets, relax))


def make_plan(
    model: Model, known: Mapping[str, float], targets: tuple[str, ...], relax: frozenset[int] = frozenset()
) -> Plan:
    """The plan answering ``targets`` from the names in ``known`` (cached; see the module essay).
    ``relax``: equations ``n = ceil(e)``/``floor(e)`` to read as ``n = e`` (where a search's boundary lies).

    Raises :class:`UnderdeterminedError` naming what to give when a target is not determined,
    or when a loop determines its variables only together.
    """
    key = plan_key(model, known, targets, relax)
    plans = compiled(model.key).plans
    hit: Plan | None = plans.get(key)
    return hit if hit is not None else plans.put(key, _compile(model, known, targets, key, relax))


def _underdetermined(model: Model, problem: Problem, missing: list[str]) -> UnderdeterminedError:
    need = problem.missing()
    hint = (
        f"give {', '.join(describe_var(model, n) for n in need[:8])}"
        if need
        else "the equations in play do not determine it"
    )
    if model.presets:
        hint += f" (presets: {', '.join(sorted(model.presets))} set many at once)"
    return UnderdeterminedError(
        f"cannot determine {', '.join(missing)} from the givens", missing=tuple(need), hint=hint
    )


def _compile(
    model: Model,
    known: Mapping[str, float],
    targets: tuple[str, ...],
    key: tuple[Any, ...],
    relax: frozenset[int] = frozenset(),
) -> Plan:
    problem = structure(model, known, targets, relax)
    m = problem.matching
    missing = [t for t in targets if t not in problem.known and t not in m.determined]
    if missing:
        raise _underdetermined(model, problem, missing)
    wanted = {t for t in targets if t not in problem.known}
    fully_known = [i for i, e in problem.eqs.items() if e.names and e.names <= problem.known.keys()]
    checks = [i for i in sorted(m.redundant) if problem.eqs[i].names <= (m.determined | problem.known.keys())]
    checks += [i for i in fully_known if i not in checks]
    for i in checks:
        wanted |= set(problem.eqs[i].names) - problem.known.keys()
    system = {i: problem.eqs[i].names for i in m.eq_to_var}
    deps = dependencies(system, m)  # once: every constraint below and the steps read the same graph
    requirements = problem.requirements()
    for con in model.constraints:  # a constraint its defining equations determine is checked, so computed too
        unknown = names_in(con.expr) - problem.known.keys()
        if not unknown or unknown <= wanted or _holds_already(con.expr, problem.known):
            continue
        if not all(n in wanted or _defined_by(problem, m, n) for n in unknown):
            continue
        # ...unless computing its inputs would invert a requirement (a given count's ceil)
        needed = needed_for(deps, m, wanted | unknown)
        if not needed & requirements:
            wanted |= unknown
    compiler = _Compiler(model, problem.eqs)
    steps = tuple(compiler.block(block, m) for block in blocks_in_order(system, m, wanted, deps))
    computed = frozenset(v for s in steps for v in s.variables)
    relevant = set(targets) | computed
    for s in steps:
        for i in s.equations:
            relevant |= problem.eqs[i].names
    defaults = {n: problem.known[n] for n in problem.defaults_used}
    return Plan(
        model,
        key,
        frozenset(known),
        defaults,
        targets,
        dict(problem.eqs),
        steps,
        tuple(checks),
        frozenset(relevant),
        computed,
    )


def _defined_by(problem: Problem, m: Matching, name: str) -> bool:
    """True when ``name`` is computed by the equation that defines it (``name = ...``), not found by
    inverting another: a constraint on ``attention_heads`` is not checked by solving it back out of
    an ``attention_flops`` given as an override."""
    i = m.var_to_eq.get(name)
    if i is None or name in m.undetermined:
        return False
    lhs = problem.eqs[i].lhs
    return isinstance(lhs, Var) and lhs.name == name


def _holds_already(expr: Node, known: Mapping[str, float]) -> bool:
    """True when the givens alone make a constraint hold (``kv_fit == "ignore" or ...``)."""
    try:
        return bool(compile_node(expr)(dict(known)))
    except (KeyError, ArithmeticError, ValueError, TypeError):
        return False


_OPEN_TEARS = 3  # tears of a large loop kept (each costs a matching of the loop to find)


class _Compiler:
    """Turns blocks of one problem into steps (recursively for the inside of torn loops)."""

    def __init__(self, model: Model, eqs: Mapping[int, SpecialisedEq]) -> None:
        self.model = model
        self.eqs = eqs

    def block(self, block: list[int], m: Matching) -> BlockStep:
        if len(block) == 1:
            return self.single(block[0], m.eq_to_var[block[0]])
        return self.loop(block, [m.eq_to_var[i] for i in block])

    def single(self, i: int, var: str) -> BlockStep:
        e = self.eqs[i]
        reads = e.names - {var}
        if isinstance(e.lhs, Var) and e.lhs.name == var and var not in names_in(e.rhs):
            return BlockStep(Method.FORWARD, (i,), (var,), reads, (e.rhs,))
        if isinstance(e.rhs, Var) and e.rhs.name == var and var not in names_in(e.lhs):
            return BlockStep(Method.FORWARD, (i,), (var,), reads, (e.lhs,))
        if smooth_in(e.lhs, var) and smooth_in(e.rhs, var):
            inv = invert(self.model, e, var)
            if inv.roots or inv.complete:
                return BlockStep(Method.INVERTED, (i,), (var,), reads, inv.roots, inv.complete)
        return BlockStep(Method.NUMERIC, (i,), (var,), reads)

    def subsystem(self, equations: list[int], unknowns: set[str], loops: bool = True) -> tuple[BlockStep, ...] | None:
        """Steps solving ``equations`` for ``unknowns`` with everything else known; None when they
        do not determine their unknowns, or (``loops`` False) when they hold a loop: that is
        decided on the structure, before any block is compiled, so tearing a loop never recurses
        into the loops inside it."""
        system = {i: self.eqs[i].names for i in equations}
        prefer = {i: lhs.name for i in equations if isinstance(lhs := self.eqs[i].lhs, Var) and lhs.name in unknowns}
        m = match(system, unknowns, prefer)
        if m.free or m.redundant:
            return None
        order = blocks_in_order(system, m, unknowns)
        if not loops and any(len(b) > 1 for b in order):
            return None
        return tuple(self.block(b, m) for b in order)

    def loop(self, block: list[int], variables: list[str]) -> BlockStep:
        reads = frozenset().union(*(self.eqs[i].names for i in block)) - set(variables)
        pairs = list(zip(block, variables))
        for i in block:  # an integer n = ceil(...)/floor(...) inside the loop: tear there
            e = self.eqs[i]
            n = e.lhs.name if isinstance(e.lhs, Var) else ""
            if (
                n in variables
                and self.model.variables[n].integer
                and isinstance(e.rhs, Call)
                and e.rhs.fn in ("ceil", "floor")
            ):
                inner = self.subsystem([j for j in block if j != i], {v for v in variables if v != n})
                if inner is not None:
                    return BlockStep(
                        Method.INTEGER_TEAR, tuple(block), tuple(variables), reads, tears=(Tear(n, i, inner),)
                    )
        if len(block) > SYMBOLIC_LOOP_LIMIT:
            return self.large_loop(block, variables, reads, pairs)
        form = solve_loop(self.model, [self.eqs[i] for i in block], variables)
        if form.status == "free":
            texts = "; ".join(self.eqs[i].eq.text for i in block)
            raise UnderdeterminedError(
                f"the equations '{texts}' fix {', '.join(variables)} only together: they leave "
                f"{', '.join(form.free)} free",
                missing=form.free,
                hint=f"give one of {', '.join(describe_var(self.model, n) for n in form.free)}",
                where=self.eqs[block[0]].eq.where,
            )
        if form.status == "solved":
            return BlockStep(Method.LOOP, tuple(block), tuple(variables), reads, branches=form.branches)
        tears = self.tears(pairs)  # sympy's "none" too is confirmed numerically where the loop tears
        if tears:
            return BlockStep(Method.TEAR, tuple(block), tuple(variables), reads, tears=tears)
        return BlockStep(Method.LOOP, tuple(block), tuple(variables), reads, complete=form.status == "none")

    def large_loop(
        self, block: list[int], variables: list[str], reads: frozenset[str], pairs: list[tuple[int, str]]
    ) -> BlockStep:
        """A loop too large for sympy's parametric solve: linear rows when it is linear in its
        unknowns, else a tear, else sympy on the values under the budget (an answer or a refusal)."""
        rows = linear_rows([self.eqs[i] for i in block], variables)
        if rows is not None:
            return BlockStep(Method.LOOP, tuple(block), tuple(variables), reads, complete=False, linear=rows)
        tears = self.tears(pairs) or self.open_tears(block, variables)
        if tears:
            return BlockStep(Method.TEAR, tuple(block), tuple(variables), reads, tears=tears)
        return BlockStep(Method.LOOP, tuple(block), tuple(variables), reads, complete=False)

    def open_tears(self, block: list[int], variables: list[str]) -> tuple[Tear, ...]:
        """Tears of a large loop whose residual is not the torn variable's own equation: guess
        ``v``, and the equation the rest leaves over decides (a recurrence ``x_i = f(x_{i-1},
        x_{i-2})`` given both ends is torn at ``x_1``, its last equation the residual). The first
        few found, bounded variables first."""
        order = sorted(variables, key=lambda v: self.model.variables[v].bounds == (None, None))
        sources = self.sources(block, variables)
        out: list[Tear] = []
        for v in order:
            if not sources.get(v):
                continue
            unknowns = set(variables) - {v}
            system = {i: self.eqs[i].names for i in block}
            prefer = {i: lhs.name for i in block if isinstance(lhs := self.eqs[i].lhs, Var) and lhs.name in unknowns}
            m = match(system, unknowns, prefer)
            if m.free or len(m.redundant) != 1:
                continue
            (residual,) = m.redundant
            inner = self.subsystem([i for i in block if i != residual], unknowns, loops=False)
            if inner is not None:
                out.append(Tear(v, residual, inner))
                if len(out) == _OPEN_TEARS:
                    break
        return tuple(out)

    def sources(self, block: list[int], variables: list[str]) -> dict[str, set[int]]:
        """Loop variable -> the loop's equations that hold it and one other loop variable. Torn at
        ``v``, the rest is solved one equation at a time only if one of these (not the residual)
        computes its other variable first: every equation of a loop holds at least two of its
        variables, so one holding a third cannot start. A structural filter, exact, that spares
        a matching per hopeless candidate."""
        inside = set(variables)
        out: dict[str, set[int]] = {}
        for j in block:
            held = self.eqs[j].names & inside
            if len(held) == 2:
                for v in held:
                    out.setdefault(v, set()).add(j)
        return out

    def tears(self, pairs: list[tuple[int, str]]) -> tuple[Tear, ...]:
        """Ways to tear the loop at one variable so that the rest is solved one equation at a
        time; bounded variables first (their bounds bracket the root)."""
        order = sorted(pairs, key=lambda p: self.model.variables[p[1]].bounds == (None, None))
        sources = self.sources([i for i, _ in pairs], [v for _, v in pairs])
        out: list[Tear] = []
        for i, v in order:
            if not sources.get(v, set()) - {i}:
                continue  # nothing could be computed first: the rest stays a loop
            inner = self.subsystem([j for j, _ in pairs if j != i], {w for _, w in pairs if w != v}, loops=False)
            if inner is None:
                continue
            out.append(Tear(v, i, inner))
        return tuple(out)
