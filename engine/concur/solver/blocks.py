"""Running a plan for one set of values: evaluate, choose roots, tear loops, record every step.

:func:`run_plan` interprets the :class:`~concur.solver.plan.Plan`'s steps in order on a dict of
base-unit floats and returns the values and the trace. Each :class:`~concur.solver.plan.Method`
has one interpreter here; none decides *which* method to use (the plan did):

* ``FORWARD``: evaluate the expression;
* ``INVERTED``: evaluate every closed-form root and choose by :func:`concur.solver.roots.choose_root`;
  none when the roots are complete means "no value satisfies the equation" (exit 3);
* ``NUMERIC``: bracket a root of ``lhs - rhs`` within the variable's bounds;
* ``LOOP``: evaluate each closed-form branch, keep the first whose values are admissible and
  satisfy every equation of the loop; a large linear loop: its rows evaluated and solved by
  sparse elimination (:func:`solve_sparse`); otherwise sympy on the values (memoised);
* ``INTEGER_TEAR``: the smallest ``n`` whose requirement ``ceil(...)`` is at most ``n`` (for floor:
  the largest ``n`` whose capacity is at least ``n``), the rest of the loop solved for each trial;
* ``TEAR``: bracket the torn equation's residual, the rest solved for each trial.

A value outside its variable's bounds becomes the variable's ``violation`` message (or a generic
one) as an :class:`~concur.errors.InfeasibleError`; every numeric trial spends budget
(:mod:`concur.solver.budget`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..compiled import closure, compiled
from ..errors import BudgetError, ConcurError, InfeasibleError, SolveError, UsageError
from ..lang.expr import Bin, Call, Neg, Node, Var, compile_node, names_in, to_text
from ..lang.model import Model
from ..lang.pack import TEMPLATE_FIELD, Variable
from . import integers, loopmemo
from .budget import Interrupted, interruptible, spend, timed_out
from .closed_forms import symbolic_size_ok
from .forward_program import ForwardProgram
from .plan import BlockStep, Method, Plan, Step, Tear
from .problem import SpecialisedEq, fold_known
from .roots import (
    PIVOT_REL,
    PROBES,
    SEARCH_RANGE,
    TEAR_RANGE,
    bracket_root,
    choose_root,
    in_bounds,
    one_signed,
    satisfies,
    snap_integer,
)
from .solution import list_names, show_value
from .symbolic import to_sympy

__all__ = ["render_template", "run_plan", "solve_sparse", "value_on_demand"]


def _evaluate(node: Node, env: dict[str, float]) -> float:
    """``node`` on ``env`` through a closure compiled once per node object."""
    f: Any = closure(node, compile_node)
    return float(f(env))


_ABSENT = object()


def _term_scale(node: Node, env: dict[str, float]) -> float:
    """The largest magnitude among the terms ``node`` adds or subtracts (through ``min``/``max``):
    the scale of the rounding error in its value. 0 when a term cannot be evaluated."""
    try:
        if isinstance(node, Bin) and node.op in "+-":
            return max(_term_scale(node.left, env), _term_scale(node.right, env))
        if isinstance(node, Neg):
            return _term_scale(node.arg, env)
        if isinstance(node, Call) and node.fn in ("min", "max"):
            return max(_term_scale(a, env) for a in node.args)
        value = abs(_evaluate(node, env))
    except (ArithmeticError, ValueError, KeyError, TypeError):
        return 0.0
    return value if math.isfinite(value) else 0.0


class _TooLarge(Exception):
    """A loop past sympy's structural size limit (:func:`concur.solver.closed_forms.symbolic_size_ok`)."""


def _sides(e: SpecialisedEq, env: dict[str, float], var: str, x: float) -> tuple[float, float]:
    """Both sides of ``e`` with ``var`` set to ``x`` on ``env``, which is left as it was (no copy of
    the whole environment per candidate: a 1,000-step chain would be quadratic)."""
    old = env.get(var, _ABSENT)
    env[var] = x
    try:
        return _evaluate(e.lhs, env), _evaluate(e.rhs, env)
    finally:
        if old is _ABSENT:
            del env[var]
        else:
            env[var] = old  # type: ignore[assignment]


class _Run:
    """One interpretation of a plan: ``env`` (base units) and ``trace`` grow step by step.

    ``tracing`` is off while a trial only probes a value (a torn loop's residual, an integer
    search's test): its steps would be thrown away, and recording them was a quarter of the time
    of a goal seek over a torn loop. The trial at the chosen value runs with tracing on, so the
    trace of an answer is complete either way.
    """

    def __init__(self, plan: Plan, env: dict[str, float], *, tracing: bool = True) -> None:
        self.plan = plan
        self.model: Model = plan.model
        self.env = env
        self.trace: list[Step] = []
        self.tracing = tracing
        self.trials = 0  # inner solves of torn loops so far: what a remembered loop saves
        self.no_root: BlockStep | None = None  # the torn loop last found to have no admissible root

    # ------------------------------------------------------------ recording
    def record(
        self,
        var: str,
        value: float,
        method: Method,
        eq: int,
        note: str = "",
        choice: int | None = None,
        form: Node | None = None,
    ) -> None:
        """Keep ``value`` for ``var`` after the bounds check; ``form``, the expression that gave it,
        sets the scale against which a bound is tested (rounding in ``1 - p`` is not a violation)."""
        v = self.model.variables[var]
        e = self.plan.eqs[eq]
        if not math.isfinite(value):
            raise InfeasibleError(
                f"{var} has no finite value here ({value}) from '{e.eq.text}'",
                where=e.eq.where,
                variable=var,
                hint="check the givens for a zero or an overloaded system",
            )
        if v.integer:
            value = snap_integer(value)
        if not in_bounds(v.bounds, value) and not (
            form is not None and in_bounds(v.bounds, value, scale=_term_scale(form, self.env))
        ):
            self.env[var] = value
            raise InfeasibleError(self.violation(v, value), where=e.eq.where, variable=var)
        self.env[var] = value
        if self.tracing:
            self.trace.append(Step(var, value, method, eq, note, choice))

    def violation(self, v: Variable, value: float) -> str:
        if v.violation:
            return render_template(v.violation, self.model, self.env)
        lo, hi = v.bounds
        shown = f"{value / v.display.factor:.6g} {v.display.text}".strip()
        rng = (
            f"[{'-inf' if lo is None else f'{lo / v.display.factor:g}'}, "
            f"{'inf' if hi is None else f'{hi / v.display.factor:g}'}]"
        )
        return f"{v.name} would be {shown}, outside its admissible range {rng}"

    # ------------------------------------------------------------ steps
    def run(self, steps: tuple[BlockStep, ...]) -> None:
        if not self.tracing:
            self.probe(steps)
            return
        for step in steps:
            self.step(step)

    def step(self, step: BlockStep) -> None:
        """One block: a single variable by its method, else a loop."""
        if len(step.variables) == 1 and step.method in (Method.FORWARD, Method.INVERTED, Method.NUMERIC):
            self.single(step)
        else:
            self.loop(step)

    def probe(self, steps: tuple[BlockStep, ...]) -> None:
        """:meth:`run` without a trace (a torn loop's residual, an integer search's test): the
        forward steps whose values are finite and inside their bounds are settled by one compiled
        function (:mod:`concur.solver.forward_program`); any other step -- and a forward one that
        fails there -- takes the full path, which keeps the same value or raises the same error,
        and the function goes on from the next step. Most of a search's work is here."""
        program = closure(steps, ForwardProgram).for_variables(self.model.variables)
        n, i = len(steps), program(self.env, 0)
        while i < n:
            self.step(steps[i])
            i = program(self.env, i + 1)

    def single(self, step: BlockStep) -> None:
        i, var = step.equations[0], step.variables[0]
        e = self.plan.eqs[i]
        try:
            if step.method is Method.FORWARD:
                self.record(var, _evaluate(step.forms[0], self.env), Method.FORWARD, i, form=step.forms[0])
            elif step.method is Method.INVERTED:
                self.inverted(step, e, var)
            else:
                self.numeric(e, i, var)
        except (ZeroDivisionError, OverflowError, ValueError) as exc:
            if isinstance(exc, ConcurError):
                raise
            detail = (
                "division by zero"
                if isinstance(exc, ZeroDivisionError)
                else "the result is too large for a float (over 1.8e308)"
                if isinstance(exc, OverflowError)  # its own text is errno's "(34, 'Numerical result out of range')"
                else str(exc) or type(exc).__name__
            )
            known = ", ".join(f"{n}={show_value(self.model, n, self.env[n])}" for n in sorted(e.names) if n in self.env)
            raise InfeasibleError(
                f"cannot compute {var} from '{e.eq.text}': {detail} ({known})",
                where=e.eq.where,
                variable=var,
                hint="check the givens for a zero or an impossible value",
            ) from None

    def inverted(self, step: BlockStep, e: SpecialisedEq, var: str) -> None:
        i = step.equations[0]
        v = self.model.variables[var]
        candidates: list[tuple[float, float, float]] = []
        for root in step.forms:
            try:
                x = _evaluate(root, self.env)
                candidates.append((x, *_sides(e, self.env, var, x)))
            except (ArithmeticError, ValueError, KeyError, TypeError):
                candidates.append((math.nan, math.nan, math.nan))
        scales = [  # only where a root satisfies its equation but not its bounds strictly (rounding)
            _term_scale(form, self.env) if satisfies(lhs, rhs, x) and not in_bounds(v.bounds, x) else 0.0
            for form, (x, lhs, rhs) in zip(step.forms, candidates)
        ]
        chosen, count = choose_root(candidates, v.bounds, scales)
        if chosen >= 0:
            note = "" if count == 1 else f"{count} roots; took the smallest"
            self.record(var, candidates[chosen][0], Method.INVERTED, i, note, chosen, form=step.forms[chosen])
            return
        valid = [x for x, lhs, rhs in candidates if satisfies(lhs, rhs, x)]
        if valid:
            self.env[var] = valid[0]
            raise InfeasibleError(self.violation(v, valid[0]), where=e.eq.where, variable=var)
        if step.complete:
            # sympy's "no root" is confirmed numerically before "impossible" is said: it returns an
            # empty list for a quintic it cannot solve in radicals (b = a**5 + a)
            found = self.bracket(e, var)
            if found is not None:
                self.record(var, found, Method.NUMERIC, i, "bracketed root within bounds (no closed form)")
                return
            known = ", ".join(f"{n}={show_value(self.model, n, self.env[n])}" for n in sorted(e.names) if n in self.env)
            if _holds_everywhere(e, self.env, var, v.bounds):
                raise UsageError(
                    f"every value of {var} satisfies '{e.eq.text}' with these givens ({known}): "
                    f"they do not determine {var}",
                    where=e.eq.where,
                    variable=var,
                    hint=f"give {var} directly, or a given that constrains it",
                )
            raise InfeasibleError(
                f"no value of {var} satisfies '{e.eq.text}' with these givens ({known})",
                where=e.eq.where,
                variable=var,
                hint="the equation has no solution here: check the givens",
            )
        self.numeric(e, i, var)

    def bracket(self, e: SpecialisedEq, var: str) -> float | None:
        """A root of ``e`` for ``var`` bracketed within its bounds (positive when unbounded below)."""
        v = self.model.variables[var]
        low, high = v.bounds
        lo = SEARCH_RANGE[0] if low is None or low <= 0 else low
        hi = SEARCH_RANGE[1] if high is None else high

        def residual(x: float) -> float:
            lhs, rhs = _sides(e, self.env, var, x)
            return lhs - rhs

        return bracket_root(residual, lo, hi, what=var, hint=f"give {var} directly, or a tighter bound on it")

    def numeric(self, e: SpecialisedEq, i: int, var: str) -> None:
        found = self.bracket(e, var)
        if found is None:
            raise InfeasibleError(
                f"no value of {var} in its bounds satisfies '{e.eq.text}'",
                where=e.eq.where,
                variable=var,
                hint="check the givens, or widen the variable's bounds",
            )
        self.record(var, found, Method.NUMERIC, i, "bracketed root within bounds")

    def loop(self, step: BlockStep) -> None:
        """A loop, memoised per (model, loop, input values): a goal seek re-solves the same loop
        for every trial, and most trials leave its inputs unchanged."""
        inputs = sorted(step.reads)
        key = (
            self.model.key,
            self.plan.key,
            step.equations,
            tuple((n, self.env.get(n)) for n in inputs),
            self.tracing,  # an entry made without tracing holds no steps
        )
        hit: tuple[Any, list[Step]] | None = compiled(self.model.key).loops.get(key)
        if hit is not None:
            outcome, steps = hit
            if isinstance(outcome, ConcurError):
                raise outcome
            self.env.update(outcome)
            self.trace.extend(steps)
            return
        disk = None
        if step.method in (Method.INTEGER_TEAR, Method.TEAR):  # searches over trials: worth a file
            disk = loopmemo.entry_key(
                self.model.key, self.plan.key, step.equations, [list(p) for p in key[3]], self.tracing
            )
            kept = None if disk is None else loopmemo.recall(disk, step.variables)
            if isinstance(kept, str) and step.method is Method.TEAR:
                try:
                    self.no_loop_root(step, told=kept)
                except ConcurError as exc:
                    _remember(key, (exc, []))
                    raise
            if kept is not None and not isinstance(kept, str):
                _remember(key, kept)
                self.env.update(kept[0])
                self.trace.extend(kept[1])
                return
        mark, trials = len(self.trace), self.trials
        try:
            self.loop_unmemoised(step)
        except BudgetError:
            raise  # not an outcome of the values: a larger budget may answer it
        except ConcurError as exc:
            _remember(key, (exc, []))
            if disk is not None and self.no_root is step:
                loopmemo.remember_no_root(disk, exc.message, self.trials - trials)
            raise
        values = {v: self.env[v] for v in step.variables if v in self.env}
        _remember(key, (values, self.trace[mark:]))
        if disk is not None:
            loopmemo.remember(disk, values, self.trace[mark:], self.trials - trials)

    def loop_unmemoised(self, step: BlockStep) -> None:
        if step.method is Method.INTEGER_TEAR:
            self.integer_tear(step, step.tears[0])
            return
        if step.method is Method.TEAR:
            if not self.tear(step):
                self.no_root = step  # the refusal below is the loop's own, not an inner step's
                self.no_loop_root(step)
            return
        if step.linear:
            self.linear(step)
        elif step.branches:
            if not self.branches(step):
                self.no_loop_root(step)
        elif step.complete:
            self.no_loop_root(step)
        else:
            self.sympy_on_values(step)

    def branches(self, step: BlockStep) -> bool:
        """The first admissible closed-form branch; False when every branch failed to evaluate."""
        first: dict[str, float] | None = None
        for b, forms in enumerate(step.branches):
            try:
                values = {v: _evaluate(f, self.env) for v, f in zip(step.variables, forms)}
            except (ArithmeticError, ValueError, KeyError, TypeError):
                continue
            trial = {**self.env, **values}
            try:
                ok = all(
                    satisfies(_evaluate(self.plan.eqs[i].lhs, trial), _evaluate(self.plan.eqs[i].rhs, trial), values[v])
                    for i, v in zip(step.equations, step.variables)
                )
            except (ArithmeticError, ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                continue
            first = first or values
            if all(in_bounds(self.model.variables[v].bounds, x) for v, x in values.items()):
                others = list_names(step.variables)
                for i, v in zip(step.equations, step.variables):
                    self.record(v, values[v], Method.LOOP, i, f"solved together with {others}", b)
                return True
        if first is not None:
            self.report_bounds(step, first)
        return False

    def linear(self, step: BlockStep) -> None:
        """A large linear loop: the coefficient rows evaluated on the knowns, the sparse system
        solved by elimination with partial pivoting, and every equation checked on the solution."""
        names = list_names(step.variables)
        hint = "give one of the loop's variables directly"
        try:
            rows = [{k: _evaluate(c, self.env) for k, c in row.coefficients} for row in step.linear]
            rhs = [-_evaluate(row.constant, self.env) for row in step.linear]
            x = solve_sparse(rows, rhs, len(step.variables), what=names, hint=hint)
        except (ArithmeticError, ValueError):
            x = None
        values = dict(zip(step.variables, x)) if x is not None else {}
        trial = {**self.env, **values}
        try:
            ok = x is not None and all(
                satisfies(_evaluate(self.plan.eqs[i].lhs, trial), _evaluate(self.plan.eqs[i].rhs, trial), values[v])
                for i, v in zip(step.equations, step.variables)
            )
        except (ArithmeticError, ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            texts = _texts([self.plan.eqs[i].eq.text for i in step.equations])
            raise InfeasibleError(
                f"the linear loop {names} has no unique solution here ({texts})",
                where=self.plan.eqs[step.equations[0]].eq.where,
                hint="the equations are dependent with these givens: give one of its variables",
            )
        if not all(in_bounds(self.model.variables[v].bounds, x) for v, x in values.items()):
            self.report_bounds(step, values)
        note = f"solved together with {names} ({len(values)} linear equations)"
        for i, v in zip(step.equations, step.variables):
            self.record(v, values[v], Method.LOOP, i, note)

    def report_bounds(self, step: BlockStep, values: dict[str, float]) -> None:
        self.env.update(values)
        bad = [v for v in step.variables if not in_bounds(self.model.variables[v].bounds, values[v])] or list(
            step.variables
        )
        worst = next((v for v in bad if self.model.variables[v].violation), bad[0])
        i = step.equations[step.variables.index(worst)]
        raise InfeasibleError(
            self.violation(self.model.variables[worst], values[worst]), where=self.plan.eqs[i].eq.where, variable=worst
        )

    def no_loop_root(self, step: BlockStep, told: str | None = None) -> None:
        """No admissible root: the loop's violation message if a variable has one (``told``: its
        text as rendered before, remembered by :mod:`concur.solver.loopmemo`), else say so."""
        for i, v in zip(step.equations, step.variables):
            var = self.model.variables[v]
            if var.violation:
                text = told if told is not None else render_template(var.violation, self.model, self.env)
                raise InfeasibleError(text, where=self.plan.eqs[i].eq.where, variable=v)
        texts = _texts([self.plan.eqs[i].eq.text for i in step.equations])
        raise InfeasibleError(
            f"the loop {list_names(step.variables)} has no admissible solution ({texts})",
            where=self.plan.eqs[step.equations[0]].eq.where,
            hint="check the givens: the system may saturate or be impossible",
        )

    def trial(self, tear: Tear, x: float, *, probe: bool = False) -> tuple[dict[str, float], list[Step]]:
        """Solve ``tear.inner`` with the tear variable set to ``x``: (env, steps); raises on failure.
        A ``probe`` records no steps (the list is empty): only its values are wanted."""
        self.trials += 1
        env, mark, tracing = dict(self.env), len(self.trace), self.tracing
        self.env[tear.variable] = x
        self.tracing = tracing and not probe
        try:
            self.run(tear.inner)
            return dict(self.env), self.trace[mark:]
        finally:
            self.env, self.trace, self.tracing = env, self.trace[:mark], tracing

    def tear(self, step: BlockStep) -> bool:
        """Solve the loop ``step`` through its tears, in order; False when none gives a root.

        The next tear is tried only when this one's scan cannot vouch that the loop has no root:
        its inner solve failed somewhere (the reason a loop keeps other tears), or its variable may
        be negative (the scan covers positive values only). A residual defined at every scan point
        and of one sign says the loop has no fixed point with that variable anywhere in its range;
        another tear of the same equations would scan the same solutions again (a saturated fleet
        paid four full scans per replica count tried).
        """
        scanned: list[float | None] = []
        for tear in step.tears:
            e = self.plan.eqs[tear.equation]
            var = self.model.variables[tear.variable]

            def residual(x: float, tear: Tear = tear, e: SpecialisedEq = e) -> float:
                try:
                    env, _ = self.trial(tear, x, probe=True)
                except ConcurError as exc:
                    raise ValueError(str(exc)) from None
                return _evaluate(e.lhs, env) - _evaluate(e.rhs, env)

            low, high = var.bounds
            lo = TEAR_RANGE[0] if low is None or low <= 0 else low
            hi = TEAR_RANGE[1] if high is None else high
            root = bracket_root(
                residual,
                lo,
                hi,
                what=list_names(step.variables),
                hint=f"give {tear.variable} directly, or a tighter bound on it",
                scanned=scanned,
            )
            if root is None:
                if low is not None and low >= 0 and one_signed(scanned):
                    return False
                continue
            try:
                env, steps = self.trial(tear, root)
            except ConcurError:
                continue
            self.env = env
            self.record(
                tear.variable,
                root,
                Method.TEAR,
                tear.equation,
                f"loop torn at {tear.variable}, root bracketed within its bounds",
            )
            self.trace.extend(steps)  # after the torn variable: every inner step reads it
            return True
        return False

    def integer_tear(self, step: BlockStep, tear: Tear) -> None:
        e = self.plan.eqs[tear.equation]
        var = self.model.variables[tear.variable]
        v = var.name
        ceil = isinstance(e.rhs, Call) and e.rhs.fn == "ceil"

        def attempt(n: float, probe: bool = False) -> tuple[float, dict[str, float], list[Step]] | None:
            spend(v, f"give {v} directly")
            try:
                env, steps = self.trial(tear, n, probe=probe)
                env[v] = n
                return _evaluate(e.rhs, env), env, steps
            except (ConcurError, ArithmeticError, ValueError):
                return None

        def ok(n: int) -> bool:
            res = attempt(float(n), probe=True)
            return res is not None and (res[0] <= n if ceil else res[0] >= n)

        lo = math.ceil(var.bounds[0]) if var.bounds[0] is not None else 0
        hi = math.floor(var.bounds[1]) if var.bounds[1] is not None else 1 << 40
        chosen = integers.smallest(ok, lo, hi) if ceil else integers.largest(ok, lo, hi)
        if chosen is not None and var.bounds[1] is None and chosen >= hi:
            raise InfeasibleError(
                f"no {v} below {hi} is {'enough' if ceil else 'the largest'} for '{e.eq.text}': the search "
                f"stopped at its range edge",
                where=e.eq.where,
                variable=v,
                hint="the load may exceed what any fleet of this kind serves",
            )
        result = None if chosen is None else attempt(float(chosen))
        if chosen is None or result is None:
            word = "enough" if ceil else "any"
            raise InfeasibleError(
                f"no {v} in [{lo}, {hi}] is {word} for '{e.eq.text}'",
                where=e.eq.where,
                variable=v,
                hint="the load may exceed what any fleet of this kind serves",
            )
        g, env, steps = result
        word, rel = ("smallest", "<=") if ceil else ("largest", ">=")
        # why not one step closer: the neighbour the search rejected, and what it asks for there
        near = chosen - 1 if ceil else chosen + 1
        why_not = ""
        if lo <= near <= hi:
            rejected = attempt(float(near), probe=True)
            why_not = (
                f"; at {v} = {near} it asks for {rejected[0]:.6g}"
                if rejected is not None
                else f"; at {v} = {near} the loop has no steady state"
            )
        self.env = env
        self.trace.append(
            Step(
                v,
                float(chosen),
                Method.INTEGER_TEAR,
                tear.equation,
                f"{word} {v} with {to_text(e.rhs)} = {g:.6g} {rel} {v} = {chosen}{why_not} (loop torn at {v})",
            )
        )
        self.trace.extend(steps)  # after the torn integer: every inner step reads it

    def sympy_on_values(self, step: BlockStep) -> None:
        """The last resort for a loop without closed forms or tears: sympy with the values in."""
        eqs = [self.plan.eqs[i] for i in step.equations]
        variables = list(step.variables)
        solutions: list[dict[str, float]] = []
        try:
            if not symbolic_size_ok(eqs, set(variables)):
                raise _TooLarge()
            with interruptible():
                import sympy as sp

                names: set[str] = set()
                for e in eqs:
                    names |= e.names
                symbols = {n: sp.Symbol(n, real=True) for n in names}
                subs = {symbols[n]: sp.Float(self.env[n], 17) for n in names if n not in variables}
                system = [(to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols)).subs(subs) for e in eqs]
                for sol in sp.solve(system, [symbols[v] for v in variables], dict=True):
                    try:
                        solutions.append({v: float(sol[symbols[v]]) for v in variables})
                    except (TypeError, KeyError):
                        continue
        except Interrupted:
            raise timed_out(list_names(variables)) from None
        except Exception:
            solutions = []
        for values in solutions:
            if all(in_bounds(self.model.variables[v].bounds, x) for v, x in values.items()):
                for i, v in zip(step.equations, variables):
                    self.record(v, values[v], Method.LOOP, i, f"solved together with {list_names(variables)}")
                return
        if solutions:
            self.report_bounds(step, solutions[0])
        for i, v in zip(step.equations, variables):
            violation = self.model.variables[v].violation
            if violation:
                raise InfeasibleError(
                    render_template(violation, self.model, self.env), where=self.plan.eqs[i].eq.where, variable=v
                )
        raise SolveError(
            f"cannot solve the loop {list_names(variables)} ({_texts([e.eq.text for e in eqs])})",
            where=eqs[0].eq.where,
            hint="give one of these values directly",
        )


def solve_sparse(
    rows: list[dict[int, float]], rhs: list[float], n: int, *, what: str = "a linear loop", hint: str = ""
) -> list[float] | None:
    """``x`` with ``sum(rows[r][k] * x[k]) = rhs[r]`` for every row: Gaussian elimination with
    partial pivoting on sparse rows (a loop's equations each hold a few of its unknowns, so a
    banded system of hundreds costs milliseconds, and no numpy). None when it is singular.
    Spends budget once per column, so a dense system past the budget is refused, not waited for.

    >>> solve_sparse([{0: 1.0, 1: 1.0}, {0: 1.0, 1: -1.0}], [3.0, 1.0], 2)
    [2.0, 1.0]
    """
    rows = [dict(r) for r in rows]
    rhs = list(rhs)
    holding: dict[int, set[int]] = {}
    for r, row in enumerate(rows):
        for k in row:
            holding.setdefault(k, set()).add(r)
    scale = max((abs(v) for row in rows for v in row.values()), default=0.0)
    pivots: list[int] = []
    used: set[int] = set()
    for k in range(n):
        spend(what, hint)
        candidates = sorted(r for r in holding.get(k, ()) if r not in used)
        if not candidates:
            return None
        p = max(candidates, key=lambda r: abs(rows[r][k]))
        pivot = rows[p][k]
        if not math.isfinite(pivot) or abs(pivot) <= PIVOT_REL * scale:
            return None
        used.add(p)
        pivots.append(p)
        top = rows[p]
        for r in candidates:
            if r == p:
                continue
            row = rows[r]
            f = row.pop(k) / pivot
            holding[k].discard(r)
            for j, v in top.items():
                if j != k:
                    if j not in row:
                        holding.setdefault(j, set()).add(r)
                    row[j] = row.get(j, 0.0) - f * v
            rhs[r] -= f * rhs[p]
    x = [0.0] * n
    for k in range(n - 1, -1, -1):
        top = rows[pivots[k]]
        x[k] = (rhs[pivots[k]] - sum(v * x[j] for j, v in top.items() if j != k)) / top[k]
    return x


def _texts(texts: list[str]) -> str:
    """A loop's equations for a one-line message: all of a small loop's, the first three of a large one's."""
    if len(texts) <= 16:
        return "; ".join(texts)
    return "; ".join(texts[:3]) + f"; ... ({len(texts)} equations)"


def _remember(key: tuple[Any, ...], value: tuple[Any, list[Step]]) -> None:
    """Keep a loop's outcome in its model's :class:`~concur.compiled.Compiled` (``key[0]``: the model key)."""
    compiled(key[0]).loops.put(key, value)


def run_plan(
    plan: Plan, values: Mapping[str, float], sources: Mapping[str, str], *, trace: bool = True
) -> tuple[dict[str, float], list[Step]]:
    """Run ``plan`` on ``values`` (base units, every name in ``plan.known``): (env, trace).

    The trace starts with the givens, presets and defaults the plan uses, then one step per
    computed value in dependency order; it is empty with ``trace=False`` (a goal seek's trial,
    whose values alone are wanted). Raises InfeasibleError/SolveError/BudgetError.
    """
    env = {k: v for k, v in values.items() if k in plan.known}
    env.update((k, v) for k, v in plan.defaults.items() if k not in env)
    run = _Run(plan, env, tracing=trace)
    if not trace:
        run.run(plan.steps)
        return run.env, []
    for name, value in env.items():
        if name in plan.defaults and name not in values:
            run.trace.append(Step(name, value, Method.DEFAULT))
        else:
            source = sources.get(name, "")
            method = Method.PRESET if source.startswith("preset") else Method.GIVEN
            run.trace.append(Step(name, value, method, note=source if method is Method.PRESET else ""))
    run.run(plan.steps)
    return run.env, run.trace


def value_on_demand(name: str, model: Model, env: dict[str, float]) -> float | None:
    """A variable a message mentions but the plan did not compute: evaluate its defining equation."""
    for eq in model.equations:
        if isinstance(eq.lhs, Var) and eq.lhs.name == name:
            rhs = fold_known(eq.rhs, env)
            if names_in(rhs) <= env.keys():
                try:
                    return _evaluate(rhs, env)
                except (ArithmeticError, ValueError):
                    return None
    return None


def _holds_everywhere(
    e: SpecialisedEq, env: dict[str, float], var: str, bounds: tuple[float | None, float | None]
) -> bool:
    """True when the equation holds exactly at every probe of ``var`` across its bounds (a question
    that leaves ``var`` free: retry_after = max(0, (cost - tokens) / rate) = 0 for any rate)."""
    lo, hi = bounds
    probes = [p for p in PROBES if (lo is None or p >= lo) and (hi is None or p <= hi)]
    if len(probes) < 3:
        return False
    for x in probes:
        try:
            trial = {**env, var: x}
            if _evaluate(e.lhs, trial) != _evaluate(e.rhs, trial):
                return False
        except (ArithmeticError, ValueError, KeyError, TypeError):
            return False
    return True


def render_template(text: str, model: Model, env: dict[str, float]) -> str:
    """Fill ``{name}`` with the value in its display unit: four significant digits, whole numbers with
    thousands separators from 10,000 up (200,000 tokens, not 2e+05)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        var = model.variables.get(name)
        value = env.get(name) if var is not None else None
        if var is not None and value is None:
            value = value_on_demand(name, model, env)
        if var is None or value is None:
            return name  # a value the run never reached: its name, not a raw template

        if var.choices:
            return var.choices[int(value)]
        shown = value / var.display.factor
        number = f"{shown:,.0f}" if math.isfinite(shown) and abs(shown) >= 1e4 else f"{shown:.4g}"
        return f"{number} {var.display.text}".strip()

    return " ".join(TEMPLATE_FIELD.sub(sub, text).split())
