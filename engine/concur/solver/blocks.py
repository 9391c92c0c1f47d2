"""Solving blocks in order: evaluate, invert, tear loops, and record every step.

A one-equation block is evaluated when its unknown stands alone on one side, inverted with a
cached closed form otherwise, or root-bracketed within bounds. A loop is solved by sympy, torn
at an integer ``n = ceil(...)`` (the smallest n that suffices), or torn at a bounded variable and
root-bracketed. Values leaving their bounds become the variable's ``violation`` message.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..errors import ConcurError, InfeasibleError, SolveError
from ..lang.expr import Call, Var, names_in, to_text
from .inverse import smooth_in, symbolic_inverse
from ..lang.model import Model
from ..lang.pack import Variable
from .problem import Problem, SpecialisedEq, evaluate, fold_known, in_bounds
from .solution import Step, show_value
from .structure import blocks_in_order, match

__all__ = ["Executor", "bracket_root", "render_template"]


def bracket_root(f: Callable[[float], float], lo: float, hi: float) -> float | None:
    """A root of ``f`` in [lo, hi] by scanning (log-spaced when wide) then bisection."""
    if lo > 0 and hi / lo > 100:
        points = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    else:
        points = [lo + (hi - lo) * i / 200 for i in range(201)]
    prev_x, prev_f = None, None
    for x in points:
        try:
            fx = f(x)
        except (ArithmeticError, ValueError):
            prev_x = None
            continue
        if fx == 0:
            return x
        if prev_x is not None and prev_f is not None and (fx > 0) != (prev_f > 0):
            a, b, fa = prev_x, x, prev_f
            for _ in range(200):
                mid = 0.5 * (a + b)
                fm = f(mid)
                if fm == 0 or abs(b - a) <= 1e-15 * max(abs(mid), 1e-300):
                    return mid
                if (fm > 0) == (fa > 0):
                    a, fa = mid, fm
                else:
                    b = mid
            return 0.5 * (a + b)
        prev_x, prev_f = x, fx
    return None


_LOOP_MEMO: dict[tuple, tuple] = {}
_LOOP_MEMO_LIMIT = 4096


def _remember(key: tuple, value: tuple) -> None:
    if len(_LOOP_MEMO) >= _LOOP_MEMO_LIMIT:
        _LOOP_MEMO.clear()
    _LOOP_MEMO[key] = value


class Executor:
    def __init__(self, model: Model, problem: Problem, sources: dict[str, str]) -> None:
        self.model = model
        self.p = problem
        self.env: dict[str, float] = dict(problem.known)
        self.trace: list[Step] = []
        for name, value in problem.known.items():
            method = "default" if name in problem.defaults_used else (
                "preset" if sources.get(name, "").startswith("preset") else "given")
            self.trace.append(Step(name, value, method, note=sources.get(name, "")
                                   if method == "preset" else ""))

    def run(self, wanted: set[str]) -> None:
        m = self.p.matching
        system = {i: self.p.eqs[i].names for i in m.eq_to_var}
        for block in blocks_in_order(system, m, wanted):
            if len(block) == 1:
                self._single(block[0], m.eq_to_var[block[0]])
            else:
                self._loop(block, [m.eq_to_var[i] for i in block])

    def _record(self, var: str, value: float, method: str, e: SpecialisedEq, note: str = "") -> None:
        v = self.model.variables[var]
        if not math.isfinite(value):
            raise InfeasibleError(f"{var} has no finite value here ({value}) from '{e.eq.text}'", where=e.eq.where,
                                  variable=var, hint="check the givens for a zero or an overloaded system")
        if v.integer and abs(value - round(value)) <= 1e-9 * max(1.0, abs(value)):
            value = float(round(value))
        if not in_bounds(v, value):
            self.env[var] = value
            raise InfeasibleError(self._violation(v, value), where=e.eq.where, variable=var)
        self.env[var] = value
        self.trace.append(Step(var, value, method, e.eq.text, str(e.eq.where), note))

    def _violation(self, v: Variable, value: float) -> str:
        if v.violation:
            return render_template(v.violation, self.model, self.env)
        lo, hi = v.bounds
        shown = f"{value / v.display.factor:.6g} {v.display.text}".strip()
        rng = f"[{'-inf' if lo is None else f'{lo / v.display.factor:g}'}, " \
              f"{'inf' if hi is None else f'{hi / v.display.factor:g}'}]"
        return f"{v.name} would be {shown}, outside its admissible range {rng}"

    def _single(self, i: int, var: str) -> None:
        e = self.p.eqs[i]
        try:
            self._single_unguarded(e, var)
        except (ZeroDivisionError, OverflowError, ValueError) as exc:
            if isinstance(exc, ConcurError):
                raise
            detail = "division by zero" if isinstance(exc, ZeroDivisionError) else str(exc) or type(exc).__name__
            known = ", ".join(f"{n}={show_value(self.model, n, self.env[n])}" for n in sorted(e.names) if n in self.env)
            raise InfeasibleError(f"cannot compute {var} from '{e.eq.text}': {detail} ({known})", where=e.eq.where,
                                  variable=var, hint="check the givens for a zero or an impossible value") from None

    def _single_unguarded(self, e: SpecialisedEq, var: str) -> None:
        if isinstance(e.lhs, Var) and e.lhs.name == var and var not in names_in(e.rhs):
            self._record(var, evaluate(e.rhs, self.env), "equation", e)
            return
        if isinstance(e.rhs, Var) and e.rhs.name == var and var not in names_in(e.lhs):
            self._record(var, evaluate(e.lhs, self.env), "equation", e)
            return
        v = self.model.variables[var]
        if smooth_in(e.lhs, var) and smooth_in(e.rhs, var):
            candidates = []
            for root in symbolic_inverse(self.model, e, var):
                try:
                    value = evaluate(root, self.env)
                except (ArithmeticError, ValueError, KeyError, TypeError):
                    continue
                if isinstance(value, complex) or not math.isfinite(value):
                    continue
                miss = evaluate(e.lhs, {**self.env, var: value}) - evaluate(e.rhs, {**self.env, var: value})
                scale = max(abs(evaluate(e.lhs, {**self.env, var: value})), abs(value), 1e-300)
                if abs(miss) > 1e-6 * scale:
                    continue
                candidates.append(value)
            admissible = [c for c in candidates if in_bounds(v, c)]
            if admissible:
                self._record(var, min(admissible, key=abs) if len(admissible) > 1 else admissible[0], "inverted", e,
                             note="" if len(admissible) == 1 else f"{len(admissible)} roots; took the smallest")
                return
            if candidates:
                self.env[var] = candidates[0]
                raise InfeasibleError(self._violation(v, candidates[0]), where=e.eq.where, variable=var)
        # numeric fallback within bounds
        low, high = v.bounds
        lo = 1e-12 if low is None or low <= 0 else low
        hi = 1e18 if high is None else high

        def residual(x: float) -> float:
            return evaluate(e.lhs, {**self.env, var: x}) - evaluate(e.rhs, {**self.env, var: x})

        found = bracket_root(residual, lo, hi)
        if found is None:
            raise SolveError(f"no value of {var} in its bounds satisfies '{e.eq.text}'", where=e.eq.where,
                             variable=var, hint="widen the variable's bounds or check the givens")
        self._record(var, found, "numeric", e, note="bracketed root within bounds")

    def _solve_subsystem(self, pairs: list[tuple[int, str]]) -> None:
        """Solve equations ``pairs`` (id, unknown) in dependency order, with everything else known."""
        unknowns = {v for _, v in pairs}
        system = {i: self.p.eqs[i].names for i, _ in pairs}
        prefer = {i: v for i, v in pairs}
        m = match(system, unknowns, prefer)
        if m.free or m.redundant:
            raise SolveError("the loop cannot be torn at this variable")
        for sub in blocks_in_order(system, m, unknowns):
            if len(sub) == 1:
                self._single(sub[0], m.eq_to_var[sub[0]])
            else:
                self._loop(sub, [m.eq_to_var[i] for i in sub])

    def _acyclic(self, pairs: list[tuple[int, str]]) -> bool:
        """Whether ``pairs`` can be solved one equation at a time once the others are known."""
        unknowns = {v for _, v in pairs}
        system = {i: self.p.eqs[i].names for i, _ in pairs}
        m = match(system, unknowns, {i: v for i, v in pairs})
        if m.free or m.redundant:
            return False
        return all(len(b) == 1 for b in blocks_in_order(system, m, unknowns))

    def _integer_tear(self, block: list[int], vars_: list[str]) -> bool:
        """Tear a loop at an integer ``n = ceil(...)`` (or ``floor``): search n, solve the rest for each.

        ``replicas = ceil(in_flight / capacity)`` inside the batch fixed point has no smooth inverse;
        the answer is the smallest n whose requirement ceil(...) is at most n (for floor: the largest
        n whose capacity floor(...) is at least n). The rest of the loop is solved for each candidate.
        """
        for i, v in zip(block, vars_):
            var = self.model.variables[v]
            e = self.p.eqs[i]
            if var.integer and isinstance(e.lhs, Var) and e.lhs.name == v and isinstance(e.rhs, Call) \
                    and e.rhs.fn in ("ceil", "floor"):
                self._tear_at(e, var, [(j, w) for j, w in zip(block, vars_) if j != i])
                return True
        return False

    def _tear_at(self, e: SpecialisedEq, var: Variable, rest: list[tuple[int, str]]) -> None:
        v = var.name
        requirement = isinstance(e.rhs, Call) and e.rhs.fn == "ceil"

        def attempt(n: float) -> tuple[float, dict[str, float], list[Step]] | None:
            env, mark = dict(self.env), len(self.trace)
            self.env[v] = n
            try:
                self._solve_subsystem(rest)
                g = evaluate(e.rhs, self.env)
                return g, dict(self.env), self.trace[mark:]
            except (ConcurError, ArithmeticError, ValueError):
                return None
            finally:
                self.env, self.trace = env, self.trace[:mark]

        def ok(n: float) -> bool:
            res = attempt(n)
            return res is not None and (res[0] <= n if requirement else res[0] >= n)

        lo = int(math.ceil(var.bounds[0])) if var.bounds[0] is not None else 0
        hi = int(math.floor(var.bounds[1])) if var.bounds[1] is not None else 1 << 40
        from . import integers as frontier

        goal = lambda n: ok(float(n))  # noqa: E731
        chosen = frontier.smallest(goal, lo, hi) if requirement else frontier.largest(goal, lo, hi)
        result = None if chosen is None else attempt(float(chosen))
        if chosen is None or result is None:
            word = "enough" if requirement else "any"
            raise InfeasibleError(f"no {v} in [{lo}, {hi}] is {word} for '{e.eq.text}'", where=e.eq.where,
                                  variable=v, hint="the load may exceed what any fleet of this kind serves")
        g, env, steps = result
        self.env = env
        self.trace.extend(steps)
        word = "smallest" if requirement else "largest"
        rel = "<=" if requirement else ">="
        self.trace.append(Step(v, float(chosen), "search", e.eq.text, str(e.eq.where),
                               f"{word} {v} with {to_text(e.rhs)} = {g:.6g} {rel} {v} (loop torn at {v})"))

    def _numeric_tear(self, block: list[int], vars_: list[str]) -> bool:
        """Tear the loop at one variable and find the root of its equation's residual numerically.

        For each candidate tear variable (bounded ones first), the rest of the loop is solved as a
        subsystem for a trial value and the torn equation's residual is bracketed within the
        variable's bounds (log-spaced scan, then bisection). Returns False when no tear works:
        the caller then reports the loop (or its violation message) as unsolvable.
        """
        order = sorted(zip(block, vars_), key=lambda p: self.model.variables[p[1]].bounds == (None, None))
        for i, v in order:
            e = self.p.eqs[i]
            rest = [(j, w) for j, w in zip(block, vars_) if j != i]
            if not self._acyclic(rest):
                continue  # tearing here leaves a loop: every trial would need sympy
            var = self.model.variables[v]

            def residual(x: float, e: SpecialisedEq = e, v: str = v, rest: list[tuple[int, str]] = rest) -> float:
                env, mark = dict(self.env), len(self.trace)
                self.env[v] = x
                try:
                    self._solve_subsystem(rest)
                    return evaluate(e.lhs, self.env) - evaluate(e.rhs, self.env)
                except ConcurError as exc:
                    raise ValueError(str(exc)) from None
                finally:
                    self.env, self.trace = env, self.trace[:mark]

            low, high = var.bounds
            lo = 1e-9 if low is None or low <= 0 else low
            hi = 1e15 if high is None else high
            try:
                root = bracket_root(residual, lo, hi)
            except (ArithmeticError, ValueError):
                root = None
            if root is None:
                continue
            self.env[v] = root
            mark = len(self.trace)
            try:
                self._solve_subsystem(rest)
            except ConcurError:
                self.trace = self.trace[:mark]
                continue
            self._record(v, root, "numeric", e, note=f"loop torn at {v}, root bracketed within its bounds")
            return True
        return False

    def _loop(self, block: list[int], vars_: list[str]) -> None:
        """Solve an algebraic loop; the outcome is memoised per (model, loop, input values).

        A goal seek evaluates the model hundreds of times, and a loop that does not depend on
        the searched variable would otherwise be re-solved (sympy, or a numeric tear) each time.
        """
        inputs = sorted(set().union(*(self.p.eqs[i].names for i in block)) - set(vars_))
        key = (self.model.key, tuple(self.p.eqs[i].eq.key for i in block), tuple(vars_),
               tuple((n, self.env.get(n)) for n in inputs))
        hit = _LOOP_MEMO.get(key)
        if hit is not None:
            outcome, steps = hit
            if isinstance(outcome, ConcurError):
                raise outcome
            self.env.update(outcome)
            self.trace.extend(steps)
            return
        mark = len(self.trace)
        try:
            self._loop_unmemoised(block, vars_)
        except ConcurError as exc:
            _remember(key, (exc, []))
            raise
        _remember(key, ({v: self.env[v] for v in vars_ if v in self.env}, self.trace[mark:]))

    def _loop_unmemoised(self, block: list[int], vars_: list[str]) -> None:
        if self._integer_tear(block, vars_):
            return
        import sympy as sp

        from .symbolic import to_sympy

        eqs = [self.p.eqs[i] for i in block]
        names: set[str] = set()
        for e in eqs:
            names |= e.names
        symbols = {n: sp.Symbol(n, real=True) for n in names}
        subs = {symbols[n]: sp.Float(self.env[n], 17) for n in names if n not in vars_}
        system = [(to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols)).subs(subs) for e in eqs]
        unknown_syms = [symbols[v] for v in vars_]
        solutions: list[dict[Any, Any]] = []
        system_is_complete = True  # False when sympy gave up rather than proved "no solution"
        transcendental = (sp.exp, sp.log, sp.Piecewise, sp.Max, sp.Min, sp.floor, sp.ceiling, sp.Abs)
        if any(eq.has(*transcendental) for eq in system):
            # sympy can spend minutes (or recurse out) on these; the numeric tear below is the tool
            solutions, system_is_complete = [], False
        else:
            try:
                solutions = sp.solve(system, unknown_syms, dict=True)
            except Exception:  # noqa: BLE001 -- sympy raises anything (RecursionError too) on odd inputs:
                solutions, system_is_complete = [], False  # that is "no closed form", never a crash
        for sol in solutions:
            try:
                vals = {v: float(sol[symbols[v]]) for v in vars_}
            except (TypeError, KeyError):
                continue
            if all(in_bounds(self.model.variables[v], x) for v, x in vals.items()):
                for v, e in zip(vars_, eqs):
                    self._record(v, vals[v], "loop", e, note=f"solved with {', '.join(x for x in vars_ if x != v)}")
                return
        if solutions:
            # roots exist but none is admissible: report the variable that leaves its bounds
            vals = {}
            for v in vars_:
                try:
                    vals[v] = float(solutions[0][symbols[v]])
                except (TypeError, KeyError):
                    vals[v] = math.nan
            self.env.update(vals)
            bad = [v for v in vars_ if not in_bounds(self.model.variables[v], vals[v])] or vars_
            worst = next((v for v in bad if self.model.variables[v].violation), bad[0])
            raise InfeasibleError(self._violation(self.model.variables[worst], vals[worst]),
                                  where=eqs[vars_.index(worst)].eq.where, variable=worst)
        # sympy proved there is no solution at all (a fixed point exactly at saturation), or gave up
        # and no numeric root lies within the bounds: either way an answer, which a variable's
        # violation message explains when the pack has one.
        if not system_is_complete and self._numeric_tear(block, vars_):
            return
        for v, e in zip(vars_, eqs):
            var = self.model.variables[v]
            if var.violation:
                raise InfeasibleError(render_template(var.violation, self.model, self.env), where=e.eq.where,
                                      variable=v)
        raise SolveError(f"cannot solve the loop {', '.join(vars_)} ({'; '.join(e.eq.text for e in eqs)})",
                         where=eqs[0].eq.where, hint="give one of these values directly")


def value_on_demand(name: str, model: Model, env: dict[str, float]) -> float | None:
    """A variable a message mentions but the plan did not compute: evaluate its defining equation."""
    for eq in model.equations:
        if isinstance(eq.lhs, Var) and eq.lhs.name == name:
            rhs = fold_known(eq.rhs, env)
            if names_in(rhs) <= env.keys():
                try:
                    return evaluate(rhs, env)
                except (ArithmeticError, ValueError):
                    return None
    return None


def render_template(text: str, model: Model, env: dict[str, float]) -> str:
    """Fill ``{name}`` with the value in its display unit."""
    import re

    def sub(m: "re.Match[str]") -> str:
        name = m.group(1)
        var = model.variables.get(name)
        value = env.get(name) if var is not None else None
        if var is not None and value is None:
            value = value_on_demand(name, model, env)
        if var is None or value is None:
            return m.group(0)
        if var.choices:
            return var.choices[int(value)]
        return f"{value / var.display.factor:.4g} {var.display.text}".strip()

    return " ".join(re.sub(r"\{([A-Za-z][A-Za-z0-9_]*)\}", sub, text).split())
