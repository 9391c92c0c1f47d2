"""Sweeps: one structural solve, evaluated over whole numpy arrays.

How it is designed, and why
---------------------------
A sweep asks the same question at many points that differ only in the swept variables
(concurrency 1..512, or a grid of tp x context).  The *structure* of the answer -- which
equation computes which unknown, in which order -- depends only on which variables are known,
not on their values.  So the sweep builds the solver's structural problem
(:class:`concur.solver.problem.Problem`) once, with the swept variables as givens, and walks its
blocks in dependency order exactly as :class:`concur.solver.blocks.Executor` does, except that the
environment holds numpy arrays for everything downstream of a swept variable:

* a block ``x = f(...)`` is compiled once with ``compile_node(f, vector=True)`` and evaluated
  over the whole array;
* a block that must be inverted uses the solver's cached sympy inverse
  (:func:`concur.solver.inverse.symbolic_inverse`), every root evaluated vectorised, and per point the
  same choice as the scalar solver: roots that are finite, satisfy the equation and lie in the
  bounds; the smallest in magnitude when several do;
* a block that needs a bracketed search, a loop, or a goal seek makes the whole sweep fall back
  to one :func:`concur.solver.question.solve_model` per point (with a progress callback for long sweeps),
  refused up front beyond :data:`MAX_SEARCH_POINTS` points in all (a count, not a clock: a
  loop-torn or searched point costs some 4 ms, and may cost up to the solve budget).

Points are independent: a value outside a variable's bounds, a non-finite value or a failed
pack constraint turns *that point* into NaN (and every value computed from it), and the result
counts the violations per variable -- a sweep never crashes on one bad point.

Worked example: ``llm_throughput`` over ``concurrency = [1, 64]`` for Llama-3.1-8B on H100
(efficiency 1, no fixed cost): the weights (16.06 GB), ``kv_per_token`` (131,072 B) and
``avg_context`` (2,048 token) are computed once as scalars; ``memory_time`` becomes the array
``[4.874, 9.922] ms``, ``t_step`` the same, ``tokens_per_s`` ``[205.2, 6450] token/s``.
100,000 points cost a few milliseconds more than one.

Consequences: the vectorised answer equals the per-point solve to rounding (tests check
rel 1e-9 on random points); redundant-equation consistency checks are run once, at the first
point, through the scalar solver.  Non-goals: sweeping a categorical variable (a preset or a
choice) vectorised -- those are swept by looping over their values, each one vectorised sweep.

Units: ``over`` values and results are in each variable's *display* unit; choice variables come
back as their integer codes (``model.variables[name].choices[code]``).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..compiled import closure
from ..compiled import compiled as compiled_model
from ..errors import ConcurError, InfeasibleError, UsageError
from ..lang.expr import Compiled, compile_node, names_in
from ..lang.fallback import following_model
from ..lang.model import Model
from ..solver.blocks import render_template
from ..solver.givens import resolve_givens
from ..solver.plan import Method, conditions, make_plan
from ..solver.question import flush_caches, solve_model, targets_as_checks
from ..solver.roots import choose_root_array, in_bounds, in_bounds_array, snap_integer_array
from ..solver.seek import needs_search
from ..solver.throughput_inputs import FIXED_INPUTS, require_fixed
from .partial import Const, NotFoldable, flag_safe, fold

__all__ = [
    "FIXED_INPUTS",
    "MAX_POINTS",
    "MAX_SEARCH_POINTS",
    "SweepResult",
    "require_fixed",
    "require_points",
    "sweep",
]

MAX_SEARCH_POINTS = 2_000
"""Points a sweep may hold when its answer needs a scalar solve at each (the per-point fallback):
at ~3.7 ms a point (a torn loop or a searched integer) that is under 10 s on a 2-core machine."""


class SweepResult(dict[str, Any]):
    """``name -> numpy array`` (display units) plus how the sweep went.

    ``violations``: variable -> number of points that went out of bounds (or failed a
    constraint, key ``constraint: TEXT``); ``method``: ``"vector"`` or ``"per-point"``;
    ``shape``: the shape of every array (``(n,)``, or ``(n1, n2)`` for a grid).
    """

    violations: dict[str, int]
    messages: list[str]
    method: str
    shape: tuple[int, ...]

    def nan_points(self) -> int:
        """How many points have no answer for at least one output."""
        import numpy as np

        bad = np.zeros(self.shape, dtype=bool)
        for arr in self.values():
            a = np.asarray(arr)
            if a.dtype.kind == "f":
                bad |= np.isnan(a)
        return int(bad.sum())


# ---------------------------------------------------------------- ranges


MAX_POINTS = 10_000_000  # the most points of one sweep: its axes and --compare combinations together


def require_points(lengths: Sequence[int]) -> int:
    """The points of a grid of axes of ``lengths`` (their product); refuses more than :data:`MAX_POINTS`
    before anything is allocated (two axes of 10,000 would be 10^8 points, gigabytes of arrays)."""
    total = 1
    for n in lengths:
        total *= max(int(n), 0)
    if total > MAX_POINTS:
        shown = " x ".join(f"{int(n):,}" for n in lengths)
        raise UsageError(
            f"the sweep has {total:,} points ({shown}); the cap is {MAX_POINTS:,}",
            hint="use fewer points per swept variable, fewer swept or compared values, or split the sweep",
            kind="too_many_points",
        )
    return total


def range_values(start: float, stop: float, n: int, log: bool) -> Any:
    """N points from START to STOP, log-spaced when ``log`` (both ends must be positive)."""
    import numpy as np

    if log:
        if start <= 0 or stop <= 0:
            raise UsageError(f"--log needs positive ends, got {start:g}..{stop:g}")
        return np.geomspace(start, stop, n)
    return np.linspace(start, stop, n)


# ---------------------------------------------------------------- the sweep


def _categorical(model: Model, name: str) -> bool:
    return name in model.presets or (name in model.variables and bool(model.variables[name].choices))


def sweep(
    model: Model,
    over: Mapping[str, Any],
    given: Mapping[str, Any],
    outputs: Sequence[str],
    *,
    grid: bool = True,
    progress: Callable[[int, int], None] | None = None,
    validate: bool = True,
    base_units: bool = False,
) -> SweepResult:
    """Evaluate ``outputs`` at every point of ``over``; see the module essay.

    ``over``: variable -> values in its display unit (numbers), or preset/choice ids (strings).
    Two or more entries form their outer product (``grid=True``, arrays shaped
    ``(n1, n2, ...)``) or are zipped (``grid=False``, equal lengths). ``given``: as for
    :func:`concur.solver.question.solve_model`. Returns a :class:`SweepResult` holding every swept
    variable and every output. Raises ``UsageError``/``UnderdeterminedError`` for a question that
    is wrong at every point; a point that is merely infeasible becomes NaN. ``validate=False``
    skips the scalar solve of the first point that checks the question (over-determined givens
    and their contradictions) -- for a caller that has just solved the same givens itself.
    ``base_units=True``: numeric ``over`` values and every numeric result are in base units (s,
    B, flop/s...), as :func:`concur.solver.givens.resolve_givens` holds them; a caller that
    computes in base units passes its numbers straight through.

    >>> from concur.lang.model import build_model
    >>> r = sweep(build_model(["littles_law"]), {"arrival_rate": [1, 2]},
    ...           {"residence_time": 3}, ["in_flight"])
    >>> r["in_flight"], r.method
    (array([3., 6.]), 'vector')
    """
    import numpy as np

    _check_question(model, over, given, outputs)
    columns = {k: list(v) if not isinstance(v, np.ndarray) else v for k, v in over.items()}
    lengths = [len(v) for v in columns.values()]
    shape = _shape(lengths, grid)
    cat = [k for k in columns if _categorical(model, k)]
    num = [k for k in columns if k not in cat]
    _numeric_columns(columns, num)
    if base_units:  # base -> display at the door; results back to base below
        return _sweep_base_units(model, columns, given, outputs, num, cat, grid, progress, validate)
    out = SweepResult()
    out.violations, out.messages, out.method, out.shape = {}, [], "vector", shape
    if not cat:  # purely numeric: no index bookkeeping, one vectorised evaluation
        _sweep_all_numeric(model, columns, num, given, outputs, out, grid, progress, validate)
    else:
        _sweep_categories(model, columns, cat, num, given, outputs, out, grid, progress, validate)
    _summarise(out)
    return out


def _check_question(model: Model, over: Mapping[str, Any], given: Mapping[str, Any], outputs: Sequence[str]) -> None:
    """Every swept and output variable exists, none is both swept and given, and the outputs
    are determined by what is given or swept (the question is wrong at every point otherwise)."""
    if not over:
        raise UsageError("a sweep needs at least one variable to sweep over", kind="no_axis")
    for name in over:
        if name not in model.presets:
            model.variable(name)
        if name in given:
            raise UsageError(
                f"'{name}' is both swept and given",
                variable=name,
                hint="give it or sweep it, not both",
                kind="swept_and_given",
            )
    for name in outputs:
        model.variable(name)
    require_fixed(model, {**over, **given}, outputs)


def _shape(lengths: list[int], grid: bool) -> tuple[int, ...]:
    """The result's shape: one axis per swept variable on a grid, one axis of equal-length
    columns when zipped; a sweep with an empty column, or too many points, is refused."""
    if min(lengths) == 0:
        raise UsageError("a swept variable has no values")
    if grid:
        require_points(lengths)
        return tuple(lengths)
    if len(set(lengths)) != 1:
        raise UsageError(f"zipped sweeps need equal lengths, got {lengths}")
    return (lengths[0],)


def _numeric_columns(columns: dict[str, Any], num: list[str]) -> None:
    """Turn each numeric column (``num``) into a float array in place; text there is refused."""
    import numpy as np

    for k in num:
        try:
            columns[k] = np.asarray(columns[k], dtype=float)
        except (TypeError, ValueError):
            raise UsageError(
                f"swept '{k}': values must be numbers ({k} is not a preset or choice)", variable=k
            ) from None


def _sweep_base_units(
    model: Model,
    columns: dict[str, Any],
    given: Mapping[str, Any],
    outputs: Sequence[str],
    num: list[str],
    cat: list[str],
    grid: bool,
    progress: Callable[[int, int], None] | None,
    validate: bool,
) -> SweepResult:
    """:func:`sweep` with numeric columns and results in base units: converted to display
    units at the door, and every numeric result back."""
    import numpy as np

    for k in num:
        columns[k] = np.asarray(columns[k], dtype=float) / model.variables[k].display.factor
    result = sweep(model, columns, given, outputs, grid=grid, progress=progress, validate=validate)
    for name in list(result):
        var = model.variables.get(name)
        if var is not None and not var.choices and name not in cat:
            result[name] = np.asarray(result[name], dtype=float) * var.display.factor
    return result


def _sweep_all_numeric(
    model: Model,
    columns: dict[str, Any],
    num: list[str],
    given: Mapping[str, Any],
    outputs: Sequence[str],
    out: SweepResult,
    grid: bool,
    progress: Callable[[int, int], None] | None,
    validate: bool,
) -> None:
    """Fill ``out`` for numeric columns only: the grid (or zip) flattened, one vectorised
    evaluation, every array reshaped to ``out.shape``."""
    import numpy as np

    if grid and len(num) > 1:
        mesh = np.meshgrid(*[columns[k] for k in num], indexing="ij")
        arrays = {k: m.ravel() for k, m in zip(num, mesh)}
    else:
        arrays = {k: columns[k] for k in num}
    res = _sweep_numeric(model, arrays, dict(given), list(outputs), out, progress, validate)
    for k in num:
        out[k] = arrays[k].reshape(out.shape)
    for o in outputs:
        if o not in columns:
            out[o] = res[o].reshape(out.shape)


def _sweep_categories(
    model: Model,
    columns: dict[str, Any],
    cat: list[str],
    num: list[str],
    given: Mapping[str, Any],
    outputs: Sequence[str],
    out: SweepResult,
    grid: bool,
    progress: Callable[[int, int], None] | None,
    validate: bool,
) -> None:
    """Fill ``out`` when some columns are presets or choices: points as index tuples, each
    combination of categories a given of its own, the numeric columns vectorised within it."""
    import numpy as np

    shape = out.shape
    if grid:
        mesh = np.meshgrid(*[np.arange(len(v)) for v in columns.values()], indexing="ij")
        index = {k: m.ravel() for k, m in zip(columns, mesh)}
    else:
        index = {k: np.arange(shape[0]) for k in columns}
    total = int(np.prod(shape))
    flat: dict[str, Any] = {o: np.full(total, np.nan) for o in outputs}
    for combo in sorted({tuple(int(index[k][i]) for k in cat) for i in range(total)}):
        sel = np.ones(total, dtype=bool)
        point_given = dict(given)
        for k, ci in zip(cat, combo):
            sel &= index[k] == ci
            point_given[k] = columns[k][ci]
        arrays = {k: columns[k][index[k][sel]] for k in num}
        res = _sweep_numeric(model, arrays, point_given, list(outputs), out, progress, validate)
        for o in outputs:
            flat[o][sel] = res[o]
    for k in columns:
        if k in cat:
            out[k] = np.asarray([columns[k][i] for i in index[k]], dtype=object).reshape(shape)
        else:
            out[k] = columns[k][index[k]].reshape(shape)
    for o in outputs:
        if o not in columns:
            out[o] = flat[o].reshape(shape)


def _summarise(out: SweepResult) -> None:
    if out.violations:
        total = 1
        for d in out.shape:
            total *= d
        out.messages.insert(
            0,
            f"{out.nan_points()} of {total} point(s) have no admissible answer (NaN): "
            + ", ".join(f"{k} {n}x" for k, n in out.violations.items()),
        )


@dataclass(frozen=True)
class _Plan:
    """A compiled sweep for one (givens, swept names, outputs): the known base-unit values (givens,
    defaults and every block that does not depend on a swept variable, folded once), the
    vectorised evaluator of each remaining block in order with whether it must be checked point
    by point even when no FP flag was raised (bounds, integers, functions that make NaN quietly)
    and the intermediates no later block, output or constraint reads (dropped right after it, so
    numpy reuses their memory while it is still in cache), the constraints to check -- or ``vector=False`` when a block needs search, a loop or a goal
    seek (per-point fallback)."""

    vector: bool
    known: dict[str, float]
    steps: tuple[tuple[str, Compiled, bool, tuple[str, ...]], ...] = ()
    constraints: tuple[tuple[str, str, Compiled], ...] = ()


def _plan(
    model: Model,
    arrays: dict[str, Any],
    given: dict[str, Any],
    outputs: list[str],
    signature: tuple[Any, ...] = (),
    validate: bool = True,
) -> _Plan:
    # (givens, swept names, outputs) -> program, in the model's Compiled: built once per question in a
    # process, so a repeated sweep (a benchmark, a session) pays only for the array arithmetic
    key = (tuple(sorted((k, repr(v)) for k, v in given.items())), tuple(arrays), tuple(outputs), signature)
    programs = compiled_model(model.key).vectors
    cached: _Plan | None = programs.get(key)
    if cached is not None:
        return cached
    first = {k: _display_text(model, k, float(v[0])) for k, v in arrays.items()}
    find = tuple(o for o in outputs if o not in arrays)
    model = following_model(model, {**given, **first}, find)  # as solve_model: what is asked lends nothing
    givens = resolve_givens(model, {**given, **first}, find)
    for name in find:
        if name in givens.values and givens.sources.get(name) == "given":
            raise UsageError(f"'{name}' is both given and asked for", variable=name)
    known = {k: v for k, v in givens.values.items() if k not in find}
    # Validate the question once (underdetermined, contradictions) with the scalar solver.
    if validate:
        with contextlib.suppress(InfeasibleError):  # this point is infeasible; the others may not be
            solve_model(model, find, {**given, **first})
    steps = None
    plan = None
    if needs_search(model, find, known, givens) is None and not targets_as_checks(model, known, find, givens):
        plan = make_plan(model, known, find)
        steps = _vector_plan(model, plan)
    if steps is None or plan is None:
        compiled = _Plan(False, known)
    else:
        computed = set(arrays) | {s[0] for s in steps}
        scalars = {**plan.defaults, **known}
        cons = tuple(
            (con.text, con.doc, closure(con.expr, _vector))
            for con in model.constraints
            if names_in(con.expr) <= (scalars.keys() | computed) and names_in(con.expr) & computed
        )
        keep = set(outputs).union(*(names_in(con.expr) for con in model.constraints))
        scalars, folded = _fold_plan(model, scalars, set(arrays), steps, keep)
        compiled = _Plan(True, scalars, folded, cons)
    flush_caches(model)
    programs.put(key, compiled)
    return compiled


def _fold_plan(
    model: Model, known: dict[str, float], swept: set[str], steps: list[_Step], keep: set[str]
) -> tuple[dict[str, float], tuple[tuple[str, Compiled, bool, tuple[str, ...]], ...]]:
    """Fold the plan once (see :mod:`concur.sweep.partial`): a block that reads no swept variable is
    evaluated now and joins the knowns (unless it is out of bounds or not finite -- then it stays
    a step, so every sweep reports it as before); the other blocks are folded against the knowns.
    Returns (knowns, steps as (variable, evaluator, always check, names dead after it))."""
    import numpy as np

    scalars = dict(known)
    varying = set(swept)
    out: list[tuple[str, Compiled, bool, frozenset[str]]] = []
    for var, node, evaluate, reads in steps:
        v = model.variables[var]
        checked = node is None or not flag_safe(node) or v.integer or v.bounds != (None, None)
        if not reads & varying:
            probe = SweepResult()
            probe.violations, probe.messages = {}, []
            try:
                with np.errstate(all="ignore"):
                    value, mask = _check_values(
                        model, var, np.asarray(evaluate(scalars), dtype=float), probe, scalars, 1
                    )
            except (TypeError, ValueError, KeyError, ArithmeticError):
                value, mask = np.asarray(np.nan), True  # left to the sweep, which reports it per point
            if mask is None and value.ndim == 0:
                scalars[var] = float(value)
                continue
        varying.add(var)
        if node is not None:
            try:
                folded = fold(node, {k: x for k, x in scalars.items() if k not in varying})
            except NotFoldable:
                folded = evaluate
            if isinstance(folded, Const):
                evaluate = _constant(folded.value)
            else:
                evaluate = folded
        out.append((var, evaluate, checked, reads))
    last: dict[str, int] = {}
    for i, (var, _f, _c, reads) in enumerate(out):
        for name in reads | {var}:
            last[name] = i
    dead = {
        i: tuple(sorted(k for k, j in last.items() if j == i and k not in keep and k not in swept and k not in scalars))
        for i in range(len(out))
    }
    return scalars, tuple((var, f, c, dead[i]) for i, (var, f, c, _r) in enumerate(out))


def _constant(value: float) -> Compiled:
    """An evaluator that gives ``value`` at every point (a step folded to a constant)."""
    return lambda env: value


def _on_flag(kind: str, flag: int) -> None:
    raise _FlagRaised(kind)


class _FlagRaised(ArithmeticError):
    """An FP flag was raised during the fast pass: rerun it with every block checked."""


def _sweep_numeric(
    model: Model,
    arrays: dict[str, Any],
    given: dict[str, Any],
    outputs: list[str],
    out: SweepResult,
    progress: Callable[[int, int], None] | None,
    validate: bool = True,
) -> dict[str, Any]:
    """One categorical combination: numeric arrays of equal length -> outputs (display units).

    A plan folds every ``if_`` whose condition its givens decide; where a condition reads a swept
    variable (``if_(tp > 1, ...)`` over tp = 1, 2, 4) the points are split by which way each such
    condition goes, and each part runs its own plan."""
    import numpy as np

    parts = _fold_parts(model, arrays, given)
    if len(parts) == 1:
        return _sweep_shape(model, arrays, given, outputs, out, progress, parts[0][0], validate)
    n = len(next(iter(arrays.values())))
    result: dict[str, Any] = {o: np.full(n, np.nan) for o in outputs}
    for signature, where in parts:
        sub = {k: np.asarray(v)[where] for k, v in arrays.items()}
        res = _sweep_shape(model, sub, given, outputs, out, None, signature, validate)
        for o in outputs:
            result[o][where] = res[o]
    if progress is not None:
        progress(n, n)
    return result


def _fold_parts(model: Model, arrays: dict[str, Any], given: dict[str, Any]) -> list[tuple[tuple[Any, ...], Any]]:
    """``(signature, point indices)`` per way the swept-dependent ``if_`` conditions fold."""
    import numpy as np

    if not arrays:
        return [((), None)]
    n = len(next(iter(arrays.values())))
    reading = [(names, node) for names, node in conditions(model) if names & arrays.keys()]
    if not reading or n == 0:
        return [((), None)]
    first = {k: _display_text(model, k, float(v[0])) for k, v in arrays.items()}
    try:
        env: dict[str, Any] = dict(resolve_givens(model, {**given, **first}).values)
    except ConcurError:
        return [((), None)]  # the scalar validation in _plan reports it
    for k, v in arrays.items():
        env[k] = np.asarray(v, dtype=float) * model.variables[k].display.factor
    columns = []
    for names, node in reading:
        if not names <= env.keys():
            continue  # not folded by the plan: evaluated per point by np.where
        with np.errstate(all="ignore"):
            columns.append(np.broadcast_to(np.asarray(closure(node, _vector)(env), dtype=bool), (n,)))
    if not columns:
        return [((), None)]
    codes = np.stack(columns, axis=1)
    keys, inverse = np.unique(codes, axis=0, return_inverse=True)
    if len(keys) == 1:
        return [(tuple(bool(b) for b in keys[0]), None)]
    return [(tuple(bool(b) for b in key), np.flatnonzero(inverse.ravel() == j)) for j, key in enumerate(keys)]


def _sweep_shape(
    model: Model,
    arrays: dict[str, Any],
    given: dict[str, Any],
    outputs: list[str],
    out: SweepResult,
    progress: Callable[[int, int], None] | None,
    signature: tuple[Any, ...],
    validate: bool = True,
) -> dict[str, Any]:
    """Points whose ``if_`` conditions all fold alike: one plan, evaluated over the arrays."""
    import numpy as np

    n = len(next(iter(arrays.values()))) if arrays else 1
    plan = _plan(model, arrays, given, outputs, signature, validate)
    if not plan.vector:
        total = math.prod(out.shape)
        if total > MAX_SEARCH_POINTS:
            raise UsageError(
                f"this sweep has {total:,} points and its answer needs a search (a scalar solve) at each; "
                f"such a sweep takes at most {MAX_SEARCH_POINTS:,} points",
                hint="use fewer swept values, or ask for an output with a closed form",
                kind="fewer_swept",
            )
        out.method = "per-point"
        return _per_point(model, arrays, given, outputs, n, out, progress)
    inputs: dict[str, Any] = {}
    for k, v in arrays.items():
        factor = model.variables[k].display.factor
        inputs[k] = np.asarray(v, dtype=float) * factor if factor != 1 else np.asarray(v, dtype=float)
    # Fast pass: inputs finite and no FP flag raised => every flag-safe block is finite, so only
    # the blocks marked "always check" are scanned. A flag, a point out of bounds or a failed
    # constraint aborts it; the slow pass then scans every block and keeps every intermediate.
    fast = all(math.isfinite(a.sum()) for a in inputs.values())
    if fast:
        try:
            env, bad = _evaluate(model, plan, inputs, out, n, fast=True)
        except _FlagRaised:
            fast = False
    if not fast:
        env, bad = _evaluate(model, plan, inputs, out, n, fast=False)
    bad = np.broadcast_to(bad, (n,))
    result = {}
    fresh_ok = {id(a) for a in inputs.values()} | {id(a) for a in arrays.values()}
    for o in outputs:
        var = model.variables[o]
        vals = np.asarray(env[o], dtype=float)
        if not var.choices and var.display.factor != 1:
            vals = vals / var.display.factor
        if vals.shape != (n,) or id(vals) in fresh_ok:
            vals = np.array(np.broadcast_to(vals, (n,)), dtype=float)  # own copy: never alias an input
        fresh_ok.add(id(vals))
        if bad.any():
            vals[bad] = np.nan
        result[o] = vals
    return result


def _evaluate(
    model: Model, plan: _Plan, inputs: dict[str, Any], out: SweepResult, n: int, fast: bool
) -> tuple[dict[str, Any], Any]:
    """Run the plan's steps and constraints: (env in base units, mask of points with no answer).
    ``fast``: skip the scan of flag-safe blocks, drop dead intermediates, and raise
    :class:`_FlagRaised` (recording nothing in ``out``) on any FP flag, bad point or failed constraint."""
    import numpy as np

    env: dict[str, Any] = dict(plan.known)
    env.update(inputs)
    bad: Any = False
    with np.errstate(all="call", under="ignore", call=_on_flag) if fast else np.errstate(all="ignore"):
        for var, evaluate, checked, dead in plan.steps:
            value = evaluate(env)
            if fast:
                if checked:
                    with np.errstate(all="ignore"):
                        value, mask = _check_values(model, var, np.asarray(value, dtype=float), None, env, n)
                    if mask is not None:
                        raise _FlagRaised(var)
                env[var] = value
                for name in dead:
                    del env[name]
                continue
            with np.errstate(all="ignore"):
                value, mask = _check_values(model, var, np.asarray(value, dtype=float), out, env, n)
            if mask is not None:
                bad = bad | mask
            env[var] = value
        with np.errstate(all="ignore"):
            for text, doc, check in plan.constraints:
                ok = np.asarray(check(env), dtype=bool)
                if not ok.all():
                    if fast:
                        raise _FlagRaised(text)
                    key = f"constraint '{text}'"
                    fresh = ~np.broadcast_to(ok, (n,)) & ~np.broadcast_to(bad, (n,))  # count each point once
                    if fresh.any():
                        if key not in out.violations:
                            out.messages.append(f"{key}: {doc}")
                        out.violations[key] = out.violations.get(key, 0) + int(fresh.sum())
                    bad = bad | ~ok
    return env, bad


def _check_values(
    model: Model, var: str, value: Any, out: SweepResult | None, env: dict[str, Any], n: int
) -> tuple[Any, Any]:
    """(value, mask): near-integers rounded like the solver; points out of bounds or not finite
    set to NaN and returned as a mask (None when every point is fine -- the common case, found
    with one or two reductions instead of full-size boolean arrays). Violations are counted in
    ``out`` unless it is None."""
    import numpy as np

    v = model.variables[var]
    if v.integer:
        value = snap_integer_array(value)
    lo, hi = v.bounds
    if not value.size:
        return value, None
    if lo is None and hi is None:
        if math.isfinite(value.sum()):  # NaN and inf propagate into the sum; an overflow only costs the slow path
            return value, None
    else:
        low, high = float(value.min()), float(value.max())  # both propagate NaN; +-inf shows in one of them
        if (
            math.isfinite(low)
            and math.isfinite(high)
            and (lo is None or in_bounds((lo, None), low))
            and (hi is None or in_bounds((None, hi), high))
        ):
            return value, None
    bad = ~np.isfinite(value) | ~in_bounds_array((lo, hi), value)  # the numeric policy's rule, per point
    fresh = np.broadcast_to(bad & ~np.isnan(value), (n,))  # NaN inherited from upstream is counted there
    count = int(fresh.sum())
    if count and out is not None:
        out.violations[var] = out.violations.get(var, 0) + count
        if v.violation and not any(m.startswith(f"{var}: ") for m in out.messages):
            j = int(np.flatnonzero(fresh)[0])
            point = {k: float(np.broadcast_to(a, (n,))[j]) for k, a in env.items()}
            point[var] = float(np.broadcast_to(value, (n,))[j])
            out.messages.append(f"{var}: {render_template(v.violation, model, point)}".replace("\a", ""))
    return np.where(bad, np.nan, value), bad


def _display_text(model: Model, name: str, value: float) -> Any:
    var = model.variables[name]
    if var.choices or not var.display.text:
        return value
    return f"{value!r} {var.display.text}"


def _vector(node: Any) -> Compiled:
    """``node`` compiled for numpy arrays; through :func:`concur.compiled.closure`, once per node, so
    the plans of a fleet grid that solve the same equation the same way share one closure."""
    return compile_node(node, vector=True)


_Step = tuple[str, Any, Compiled, frozenset[str]]  # (variable, expression or None, evaluator, names read)


def _vector_plan(model: Model, plan: Any) -> list[_Step] | None:
    """One vector step per plan step, or None when a step is not a closed form (a loop, a numeric
    root): then the sweep runs the scalar solver per point on the same cached plan. The
    expression is None for a step solved by a closed-form inverse."""
    out: list[_Step] = []
    for step in plan.steps:
        if step.method not in (Method.FORWARD, Method.INVERTED) or len(step.variables) != 1 or not step.forms:
            return None
        var, i = step.variables[0], step.equations[0]
        e = plan.eqs[i]
        if step.method is Method.FORWARD:
            out.append((var, step.forms[0], closure(step.forms[0], _vector), step.reads))
        else:
            out.append(
                (
                    var,
                    None,
                    _pick_root(
                        model,
                        var,
                        [closure(r, _vector) for r in step.forms],
                        closure(e.lhs, _vector),
                        closure(e.rhs, _vector),
                    ),
                    step.reads,
                )
            )
    return out


def _pick_root(model: Model, var: str, roots: list[Compiled], flhs: Compiled, frhs: Compiled) -> Compiled:
    """Per point, the scalar solver's choice among closed-form roots (:mod:`concur.solver.roots`)."""
    import numpy as np

    bounds = model.variables[var].bounds

    def evaluate(env: dict[str, Any]) -> Any:
        xs, lhss, rhss = [], [], []
        for f in roots:
            try:
                x = np.asarray(f(env), dtype=float)
            except (TypeError, ValueError, KeyError):
                continue
            sub = {**env, var: x}
            xs.append(x)
            lhss.append(np.asarray(flhs(sub), dtype=float))
            rhss.append(np.asarray(frhs(sub), dtype=float))
        if not xs:
            return np.nan
        values, _index = choose_root_array(xs, lhss, rhss, bounds)
        return values

    return evaluate


def _per_point(
    model: Model,
    arrays: dict[str, Any],
    given: dict[str, Any],
    outputs: list[str],
    n: int,
    out: SweepResult,
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """The fallback: one scalar solve per point; infeasible points become NaN."""
    import numpy as np

    find = tuple(o for o in outputs if o not in arrays)
    result = {o: np.full(n, np.nan) for o in outputs}
    for k, v in arrays.items():
        result[k] = np.asarray(v, dtype=float)
    for i in range(n):
        point = {k: _display_text(model, k, float(v[i])) for k, v in arrays.items()}
        try:
            sol = solve_model(model, find, {**given, **point})
        except InfeasibleError as exc:
            key = (f"constraint '{exc.constraint}'" if exc.constraint else None) or exc.variable or "infeasible"
            out.violations[key] = out.violations.get(key, 0) + 1
            if len(out.messages) < 4:
                out.messages.append(exc.render_body())
        else:
            for o in find:
                result[o][i] = sol.value(o)
        if progress is not None:
            progress(i + 1, n)
    return result


def grid_product(values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of ``values`` (used for --compare), in order."""
    keys = list(values)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(values[k] for k in keys))]
