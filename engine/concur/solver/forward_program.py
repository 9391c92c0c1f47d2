"""A run of forward steps compiled into one Python function: the inner work of every search.

A torn loop's residual and an integer search's test run the same steps (the loop's inner blocks)
thousands of times, tracing nothing. Most of those steps are forward formulas whose value lands
inside its variable's bounds; :func:`forward_program` writes the whole run as one function
``program(env, start) -> index``:

* from step ``start`` on, each forward step's value is ``float(formula)``, snapped to a whole
  number for an integer variable, and kept in ``env`` when it is finite and inside the bounds
  (strictly by comparison, else by :func:`~concur.solver.roots.in_bounds`'s rule);
* the function returns the index of the first step it does not settle -- a step that is not a
  forward one, or a forward one whose value is not finite, raises an arithmetic error or falls
  outside its bounds -- or ``len(steps)`` when it settled them all. The caller runs that step by
  the full path (which keeps the same value, or raises the error the user sees) and calls again
  from the next.

Exactly what the interpreter of :meth:`concur.solver.blocks._Run.probe` did step by step, with the
formulas written as source by :mod:`concur.lang.codegen` (the same floats). The function is
built once per steps tuple and model variables (:func:`concur.compiled.closure`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from ..compiled import closure
from ..lang.codegen import Namespace, expression_source
from ..lang.expr import compile_node
from ..lang.pack import Variable
from .plan import BlockStep, Method
from .roots import in_bounds, snap_integer

__all__ = ["COMPILE_AFTER", "ForwardProgram", "forward_program", "interpreted_program"]

COMPILE_AFTER = 24
"""Runs of one steps tuple interpreted before it is compiled (a compilation costs about as much
as a few dozen interpreted runs of the same steps)."""

Program = Callable[[dict[str, float], int], int]


def _is_forward(step: BlockStep) -> bool:
    return step.method is Method.FORWARD and len(step.variables) == 1


def _bounds_test(var: Variable, ns: Namespace) -> str:
    """The condition a finite ``v`` meets to be kept without the full path's bounds rule."""
    lo, hi = var.bounds
    strict = " and ".join(
        [f"v >= {ns.bind('k', lo)}"] * (lo is not None) + [f"v <= {ns.bind('k', hi)}"] * (hi is not None)
    )
    if not strict:
        return "True"
    return f"({strict}) or {ns.bind('r', in_bounds, key='in_bounds')}({ns.bind('b', var.bounds)}, v)"


def _step_source(index: int, step: BlockStep, var: Variable, ns: Namespace) -> list[str]:
    if not _is_forward(step):
        return [f"    if start <= {index}:", f"        return {index}"]
    formula = expression_source(step.forms[0], ns, depth=2)
    snap = [f"        v = {ns.bind('s', snap_integer, key='snap')}(v)"] if var.integer else []
    return [
        f"    if start <= {index}:",
        "        try:",
        f"            v = float({formula})",
        "        except _arithmetic:",
        f"            return {index}",
        "        if not _isfinite(v):",
        f"            return {index}",
        *snap,
        f"        if not ({_bounds_test(var, ns)}):",
        f"            return {index}",
        f"        env[{ns.bind('n', step.variables[0], key=step.variables[0])}] = v",
    ]


def forward_program(steps: Sequence[BlockStep], variables: Mapping[str, Variable]) -> Program:
    """``program(env, start)``: run ``steps`` from ``start`` while they are forward steps that settle."""
    ns = Namespace()
    ns.globals.update(_arithmetic=(ZeroDivisionError, OverflowError, ValueError), _isfinite=math.isfinite)
    lines = ["def program(env, start):"]
    for i, step in enumerate(steps):
        lines += _step_source(i, step, variables[step.variables[0]], ns)
    lines.append(f"    return {len(steps)}")
    code = compile("\n".join(lines), "<concur forward program>", "exec")
    exec(code, ns.globals)  # source built from generated names only (concur.lang.codegen)
    program: Program = ns.globals["program"]
    return program


def interpreted_program(steps: Sequence[BlockStep], variables: Mapping[str, Variable]) -> Program:
    """The same function as :func:`forward_program`, interpreting ``steps`` with each formula's
    closure (:func:`~concur.lang.expr.compile_node`): nothing to compile up front, slower per run."""
    forms = [closure(s.forms[0], compile_node) if _is_forward(s) else None for s in steps]
    table = [(f, s.variables[0], variables[s.variables[0]]) for f, s in zip(forms, steps, strict=True)]

    def program(env: dict[str, float], start: int) -> int:
        for i in range(start, len(table)):
            fn, name, var = table[i]
            if fn is None:
                return i
            try:
                value = float(fn(env))
            except (ZeroDivisionError, OverflowError, ValueError):
                return i
            if not math.isfinite(value):
                return i
            if var.integer:
                value = snap_integer(value)
            lo, hi = var.bounds
            if not (((lo is None or value >= lo) and (hi is None or value <= hi)) or in_bounds(var.bounds, value)):
                return i
            env[name] = value
        return len(table)

    return program


class ForwardProgram:
    """The program of one steps tuple for the model variables it is run with (a steps tuple belongs
    to one model's plan; another mapping rebuilds rather than trusts it). The first
    :data:`COMPILE_AFTER` runs interpret the steps; from then on they run compiled: a search that
    probes a loop thousands of times pays the compilation once, a question that probes it a few
    times never does."""

    __slots__ = ("_built", "_interpreted", "_runs", "_variables", "steps")

    def __init__(self, steps: tuple[BlockStep, ...]) -> None:
        self.steps = steps
        self._variables: Mapping[str, Variable] | None = None
        self._built: Program | None = None
        self._interpreted: Program | None = None
        self._runs = 0

    def for_variables(self, variables: Mapping[str, Variable]) -> Program:
        """The function to run now: interpreted for the first runs, compiled after."""
        if self._variables is not variables:
            self._variables, self._built, self._interpreted, self._runs = variables, None, None, 0
        if self._built is not None:
            return self._built
        self._runs += 1
        if self._runs > COMPILE_AFTER:
            self._built = forward_program(self.steps, variables)
            return self._built
        if self._interpreted is None:
            self._interpreted = interpreted_program(self.steps, variables)
        return self._interpreted
