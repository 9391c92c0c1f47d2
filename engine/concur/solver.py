"""The solver: any variable from any sufficient set of givens.

How a question is answered (DESIGN §1):

1. **Givens** are resolved to base-unit floats: presets expand catalog entries,
   explicit values override presets, choice variables take their code.
2. ``if_`` whose condition is known is folded away, so the unused branch's
   variables are not needed (a GQA model needs no ``kv_lora_rank``).
3. **Defaults** fill in only what the givens leave undetermined, one at a time
   in declaration order, so a default never contradicts a given.
4. **Structure** (:mod:`concur.structure`): matching, Dulmage–Mendelsohn,
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

import math
import os
import pickle
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import (ConcurError, ContradictionError, InfeasibleError, SolveError, UnderdeterminedError,
                     UnknownNameError, UsageError)
from .expr import Cmp, Call, If, Node, Var, compile_node, map_tree, names_in, to_text, walk
from .functions import FUNCTIONS
from .model import Model
from .pack import Equation, Variable, convert_value
from .structure import Matching, blocks_in_order, match

__all__ = ["Step", "Solution", "solve_model", "resolve_givens", "Givens"]

REL_TOL = 1e-6


@dataclass(frozen=True)
class Step:
    """How one value was obtained. ``value`` is in base units."""

    variable: str
    value: float
    method: str  # given | preset | default | equation | inverted | search | numeric
    equation: str = ""
    where: str = ""
    note: str = ""


@dataclass
class Givens:
    values: dict[str, float]
    sources: dict[str, str]  # name -> "given" | "preset gpu=h100-sxm-80gb"
    limits: dict[str, str]  # given names that are targets to meet -> at_least/at_most
    texts: dict[str, str] = field(default_factory=dict)


@dataclass
class Solution:
    """The answer: ``values`` (base units) for every variable computed, the trace, the givens."""

    model: Model
    find: tuple[str, ...]
    values: dict[str, float]
    givens: Givens
    trace: list[Step]
    notes: list[str] = field(default_factory=list)

    def value(self, name: str, unit: str | None = None) -> float:
        """The value of ``name`` in ``unit`` (default: the variable's display unit)."""
        var = self.model.variable(name)
        if name not in self.values:
            raise UnknownNameError(f"'{name}' was not computed in this solution")
        if var.choices:
            return self.values[name]
        if unit is None:
            return self.values[name] / var.display.factor
        from .units import unit_info

        info = unit_info(unit, variable=name)
        if info.dims != var.unit.dims:
            raise UsageError(f"'{unit}' does not fit {name}'s unit '{var.unit.text}'", variable=name)
        return self.values[name] / info.factor

    def display_unit(self, name: str) -> str:
        return self.model.variable(name).display.text

    def __getitem__(self, name: str) -> Any:
        """``pint.Quantity`` in the display unit."""
        from .units import registry

        var = self.model.variable(name)
        if var.choices:
            return var.choices[int(self.values[name])]
        return registry().Quantity(self.value(name), var.display.text or "dimensionless")

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def results(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in self.find:
            var = self.model.variable(name)
            value: Any = self.value(name)
            if var.choices:
                value = var.choices[int(value)]
            elif var.integer and float(value).is_integer():
                value = int(value)
            out[name] = {"value": value, "unit": var.display.text}
        return out

    def to_json(self) -> dict[str, Any]:
        given = {}
        for name, base in self.givens.values.items():
            if name not in self.model.variables:
                continue
            var = self.model.variables[name]
            given[name] = {"value": var.choices[int(base)] if var.choices else base / var.display.factor,
                           "unit": var.display.text, "source": self.givens.sources.get(name, "given")}
        trace = []
        for s in self.trace:
            var = self.model.variables[s.variable]
            trace.append({"variable": s.variable,
                          "value": var.choices[int(s.value)] if var.choices else s.value / var.display.factor,
                          "unit": var.display.text, "method": s.method, "equation": s.equation, "where": s.where,
                          **({"note": s.note} if s.note else {})})
        return {"results": self.results(), "given": given, "trace": trace, "notes": list(self.notes)}


# ---------------------------------------------------------------- givens

def resolve_givens(model: Model, given: dict[str, Any]) -> Givens:
    """Expand presets and convert every given to base units (explicit values win over presets)."""
    from .library import get_catalog

    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    texts: dict[str, str] = {}
    for key, raw in given.items():
        if key in model.presets:
            preset = model.presets[key]
            catalog = get_catalog(preset.catalog)
            entry = catalog.entries.get(str(raw))
            if entry is None:
                import difflib

                close = difflib.get_close_matches(str(raw), list(catalog.entries), n=3)
                raise UnknownNameError(
                    f"unknown {key} '{raw}'",
                    hint=(f"did you mean {', '.join(close)}? " if close else "")
                    + f"known: {', '.join(catalog.entries)}")
            for fname, (fval, _source, floc) in entry.values.items():
                target = preset.fields.get(fname, fname) if preset.fields else fname
                if preset.fields and fname not in preset.fields:
                    continue
                var = model.variables.get(target)
                if var is None or target in given:
                    continue
                cf = catalog.fields[fname]
                if var.choices:
                    values[target] = convert_value(fval, var, floc)
                else:
                    from .pack import _per_one

                    if isinstance(fval, bool) or not isinstance(fval, (int, float)):
                        raise UsageError(f"catalog value {catalog.name}.{entry.id}.{fname} is not a number",
                                         where=floc)
                    values[target] = float(fval) * cf.unit.factor * _per_one(cf.unit, var, floc)
                sources[target] = f"preset {key}={raw}"
            continue
    for key, raw in given.items():
        if key in model.presets:
            continue
        var = model.variable(key)
        try:
            values[key] = convert_value(raw, var)
        except UsageError:
            raise
        except Exception as exc:  # PackError/UnitError from conversion: the user's input
            from .errors import ConcurError

            if isinstance(exc, ConcurError):
                raise UsageError(exc.render_body(), variable=key) from None
            raise
        if not var.choices and not _in_bounds(var, values[key], slack=0.0):
            lo, hi = var.bounds
            rng = f"[{'-inf' if lo is None else f'{lo / var.display.factor:g}'}, " \
                  f"{'inf' if hi is None else f'{hi / var.display.factor:g}'}] {var.display.text}".rstrip()
            raise UsageError(f"{key}={raw} is outside its admissible range {rng}", variable=key,
                             hint=var.doc or None)
        if var.integer and abs(values[key] / var.unit.factor - round(values[key] / var.unit.factor)) > 1e-9:
            raise UsageError(f"{key}={raw} must be a whole number", variable=key)
        sources[key] = "given"
        texts[key] = str(raw)
    limits = {k: model.variables[k].limit for k in values
              if sources.get(k) == "given" and model.variables[k].limit}
    return Givens(values, sources, {k: v for k, v in limits.items() if v}, texts)


# ---------------------------------------------------------------- specialisation

def _fold(node: Node, known: dict[str, float]) -> Node:
    """Replace ``if_`` nodes whose condition is computable from ``known`` by the chosen branch."""
    def fix(n: Node) -> Node | None:
        if isinstance(n, If) and names_in(n.cond) <= known.keys():
            try:
                return n.then if compile_node(n.cond)(known) else n.other
            except (ArithmeticError, ValueError):
                return None
        return None

    return map_tree(node, fix)


@dataclass(frozen=True)
class _Eq:
    eq: Equation
    lhs: Node
    rhs: Node
    names: frozenset[str]


# ---------------------------------------------------------------- the solver

class _Problem:
    """One structural problem: fixed knowns, unknowns, equations specialised to them."""

    def __init__(self, model: Model, known: dict[str, float], targets: tuple[str, ...]) -> None:
        self.model = model
        self.known = dict(known)
        self.targets = targets
        self.defaults_used: list[str] = []
        choice_defaults = {n: v.default for n, v in model.variables.items()
                           if v.choices and n not in self.known and v.default is not None and n not in targets}
        for n, d in choice_defaults.items():
            self.known[n] = d  # type: ignore[assignment]
            self.defaults_used.append(n)
        self._specialise()
        self._apply_defaults()

    def _specialise(self) -> None:
        self.eqs: dict[int, _Eq] = {}
        for i, eq in enumerate(self.model.equations):
            lhs, rhs = _fold(eq.lhs, self.known), _fold(eq.rhs, self.known)
            self.eqs[i] = _Eq(eq, lhs, rhs, names_in(lhs) | names_in(rhs))

    def _match(self) -> Matching:
        unknowns = {n for n in self.model.variables if n not in self.known}
        system = {i: e.names for i, e in self.eqs.items() if e.names & unknowns}
        prefer = {i: lhs.name for i in system if isinstance(lhs := self.eqs[i].lhs, Var)}
        return match(system, unknowns, prefer)

    def _apply_defaults(self) -> None:
        m = self._match()
        for name, var in self.model.variables.items():
            if var.default is None or name in self.known or name in self.targets:
                continue
            if name in m.determined and self._computed_forward(m, name):
                continue
            self.known[name] = var.default
            self.defaults_used.append(name)
            self._specialise()
            m = self._match()
        self.matching = m

    def _computed_forward(self, m: Matching, name: str) -> bool:
        """True when ``name``'s equation has it alone on the left (a default never loses to an inversion)."""
        i = m.var_to_eq.get(name)
        lhs = self.eqs[i].lhs if i is not None else None
        return isinstance(lhs, Var) and lhs.name == name

    def missing_for(self, targets: tuple[str, ...]) -> list[str]:
        m = self.matching
        lhs_vars = {e.lhs.name for e in self.eqs.values() if isinstance(e.lhs, Var)}
        free = sorted(m.free, key=lambda v: (v in lhs_vars, list(self.model.variables).index(v)))
        return free


def _eval(node: Node, env: dict[str, float]) -> float:
    return compile_node(node)(env)


_INVERSE_CACHE: dict[tuple[str, str, str], list[Node]] | None = None
_INVERSE_DIRTY = False


def _inverse_cache_path(model: Model) -> str:
    from .units import cache_dir

    return str(cache_dir() / f"inverse-{model.key}.pkl")


def _inverse_cache(model: Model) -> dict[tuple[str, str, str], list[Node]]:
    global _INVERSE_CACHE
    if _INVERSE_CACHE is None:
        _INVERSE_CACHE = {}
        try:
            with open(_inverse_cache_path(model), "rb") as fh:
                data = pickle.load(fh)  # our own cache file, written below
            if isinstance(data, dict):
                _INVERSE_CACHE.update(data)
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError):
            pass
    return _INVERSE_CACHE


def save_inverse_cache(model: Model) -> None:
    global _INVERSE_DIRTY
    if not _INVERSE_DIRTY or _INVERSE_CACHE is None:
        return
    path = _inverse_cache_path(model)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            pickle.dump(_INVERSE_CACHE, fh)
        os.replace(tmp, path)
        _INVERSE_DIRTY = False
    except OSError:
        pass


def _smooth_in(node: Node, var: str) -> bool:
    """False when ``var`` sits inside floor/ceil/erlang/% (the solver will not invert through those)."""
    for n in walk(node):
        if isinstance(n, Call) and not FUNCTIONS[n.fn].smooth and var in names_in(n):
            return False
        if isinstance(n, Cmp) and var in names_in(n):
            return False
        if getattr(n, "op", None) == "%" and var in names_in(n):
            return False
    return True


def _symbolic_inverse(model: Model, e: _Eq, var: str) -> list[Node]:
    """Closed forms of ``var`` from ``e`` (cached); [] when sympy finds none."""
    global _INVERSE_DIRTY
    key = (model.key, e.eq.key + "|" + to_text(e.lhs) + "=" + to_text(e.rhs), var)
    cache = _inverse_cache(model)
    if key in cache:
        return cache[key]
    import sympy as sp

    from .expr import from_sympy, to_sympy

    symbols = {n: sp.Symbol(n, positive=True) for n in e.names}
    symbols[var] = sp.Symbol(var, real=True)
    expr = to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols)
    expr = expr.rewrite(sp.Piecewise) if expr.has(sp.Max, sp.Min) else expr
    out: list[Node] = []
    try:
        roots = sp.solve(expr, symbols[var], dict=False, check=False, rational=False)
        for r in roots if isinstance(roots, list) else []:
            try:
                out.append(from_sympy(r))
            except TypeError:
                continue
    except (NotImplementedError, ValueError, TypeError, sp.PolynomialError):
        out = []
    cache[key] = out
    _INVERSE_DIRTY = True
    return out


def _in_bounds(var: Variable, value: float, slack: float = 1e-9) -> bool:
    lo, hi = var.bounds
    tol = slack * max(abs(value), 1.0)
    return (lo is None or value >= lo - tol) and (hi is None or value <= hi + tol)


def _bracket_root(f: Callable[[float], float], lo: float, hi: float) -> float | None:
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


class _Executor:
    def __init__(self, model: Model, problem: _Problem, sources: dict[str, str]) -> None:
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

    def _record(self, var: str, value: float, method: str, e: _Eq, note: str = "") -> None:
        v = self.model.variables[var]
        if not math.isfinite(value):
            raise InfeasibleError(f"{var} has no finite value here ({value}) from '{e.eq.text}'", where=e.eq.where,
                                  variable=var, hint="check the givens for a zero or an overloaded system")
        if v.integer and abs(value - round(value)) <= 1e-9 * max(1.0, abs(value)):
            value = float(round(value))
        if not _in_bounds(v, value):
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
            known = ", ".join(f"{n}={_show(self.model, n, self.env[n])}" for n in sorted(e.names) if n in self.env)
            raise InfeasibleError(f"cannot compute {var} from '{e.eq.text}': {detail} ({known})", where=e.eq.where,
                                  variable=var, hint="check the givens for a zero or an impossible value") from None

    def _single_unguarded(self, e: _Eq, var: str) -> None:
        if isinstance(e.lhs, Var) and e.lhs.name == var and var not in names_in(e.rhs):
            self._record(var, _eval(e.rhs, self.env), "equation", e)
            return
        if isinstance(e.rhs, Var) and e.rhs.name == var and var not in names_in(e.lhs):
            self._record(var, _eval(e.lhs, self.env), "equation", e)
            return
        v = self.model.variables[var]
        if _smooth_in(e.lhs, var) and _smooth_in(e.rhs, var):
            candidates = []
            for root in _symbolic_inverse(self.model, e, var):
                try:
                    value = _eval(root, self.env)
                except (ArithmeticError, ValueError, KeyError, TypeError):
                    continue
                if isinstance(value, complex) or not math.isfinite(value):
                    continue
                miss = _eval(e.lhs, {**self.env, var: value}) - _eval(e.rhs, {**self.env, var: value})
                scale = max(abs(_eval(e.lhs, {**self.env, var: value})), abs(value), 1e-300)
                if abs(miss) > 1e-6 * scale:
                    continue
                candidates.append(value)
            admissible = [c for c in candidates if _in_bounds(v, c)]
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
            return _eval(e.lhs, {**self.env, var: x}) - _eval(e.rhs, {**self.env, var: x})

        found = _bracket_root(residual, lo, hi)
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

    def _tear_at(self, e: _Eq, var: Variable, rest: list[tuple[int, str]]) -> None:
        v = var.name
        requirement = isinstance(e.rhs, Call) and e.rhs.fn == "ceil"

        def attempt(n: float) -> tuple[float, dict[str, float], list[Step]] | None:
            env, mark = dict(self.env), len(self.trace)
            self.env[v] = n
            try:
                self._solve_subsystem(rest)
                g = _eval(e.rhs, self.env)
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
        from . import frontier

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

            def residual(x: float, e: _Eq = e, v: str = v, rest: list[tuple[int, str]] = rest) -> float:
                env, mark = dict(self.env), len(self.trace)
                self.env[v] = x
                try:
                    self._solve_subsystem(rest)
                    return _eval(e.lhs, self.env) - _eval(e.rhs, self.env)
                except ConcurError as exc:
                    raise ValueError(str(exc)) from None
                finally:
                    self.env, self.trace = env, self.trace[:mark]

            low, high = var.bounds
            lo = 1e-9 if low is None or low <= 0 else low
            hi = 1e15 if high is None else high
            try:
                root = _bracket_root(residual, lo, hi)
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
        if self._integer_tear(block, vars_):
            return
        import sympy as sp

        from .expr import to_sympy

        eqs = [self.p.eqs[i] for i in block]
        names: set[str] = set()
        for e in eqs:
            names |= e.names
        symbols = {n: sp.Symbol(n, real=True) for n in names}
        subs = {symbols[n]: sp.Float(self.env[n], 17) for n in names if n not in vars_}
        system = [(to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols)).subs(subs) for e in eqs]
        unknown_syms = [symbols[v] for v in vars_]
        solutions = []
        system_is_complete = True  # False when sympy gave up rather than proved "no solution"
        try:
            solutions = sp.solve(system, unknown_syms, dict=True)
        except (NotImplementedError, ValueError, TypeError):
            solutions, system_is_complete = [], False
        for sol in solutions:
            try:
                vals = {v: float(sol[symbols[v]]) for v in vars_}
            except (TypeError, KeyError):
                continue
            if all(_in_bounds(self.model.variables[v], x) for v, x in vals.items()):
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
            bad = [v for v in vars_ if not _in_bounds(self.model.variables[v], vals[v])] or vars_
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


def _value_on_demand(name: str, model: Model, env: dict[str, float]) -> float | None:
    """A variable a message mentions but the plan did not compute: evaluate its defining equation."""
    for eq in model.equations:
        if isinstance(eq.lhs, Var) and eq.lhs.name == name:
            rhs = _fold(eq.rhs, env)
            if names_in(rhs) <= env.keys():
                try:
                    return _eval(rhs, env)
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
            value = _value_on_demand(name, model, env)
        if var is None or value is None:
            return m.group(0)
        if var.choices:
            return var.choices[int(value)]
        return f"{value / var.display.factor:.4g} {var.display.text}".strip()

    return " ".join(re.sub(r"\{([A-Za-z][A-Za-z0-9_]*)\}", sub, text).split())


# ---------------------------------------------------------------- entry point

def _forward(model: Model, known: dict[str, float], targets: tuple[str, ...], sources: dict[str, str],
             check: bool = True) -> _Executor:
    problem = _Problem(model, known, targets)
    missing = [t for t in targets if t not in problem.known and t not in problem.matching.determined]
    if missing:
        need = problem.missing_for(targets)
        presets = {v for p in model.presets.values() for v in ([p.key])}
        hint = f"give {', '.join(_describe_var(model, n) for n in need[:8])}" if need else \
            "the equations in play do not determine it"
        if presets:
            hint += f" (presets: {', '.join(sorted(presets))} set many at once)"
        raise UnderdeterminedError(f"cannot determine {', '.join(missing)} from the givens", missing=tuple(need),
                                   hint=hint)
    ex = _Executor(model, problem, sources)
    wanted = set(t for t in targets if t not in problem.known)
    checks = [i for i in problem.matching.redundant if problem.eqs[i].names <= (problem.matching.determined |
                                                                                 problem.known.keys())]
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
                    detail = ", ".join(f"{n}={_show(model, n, ex.env[n])}" for n in sorted(names_in(con.expr)))
                    raise InfeasibleError(f"'{con.text}' does not hold ({detail}): {con.doc}", where=con.where)
    return ex


def _show(model: Model, name: str, base: float) -> str:
    var = model.variables[name]
    if var.choices:
        return var.choices[int(base)]
    return f"{base / var.display.factor:.6g}{(' ' + var.display.text) if var.display.text else ''}"


def _describe_var(model: Model, name: str) -> str:
    var = model.variables[name]
    unit = f" [{var.display.text}]" if var.display.text else ""
    return f"{name}{unit}"


def _consistency(model: Model, e: _Eq, env: dict[str, float], sources: dict[str, str]) -> None:
    lhs, rhs = _eval(e.lhs, env), _eval(e.rhs, env)
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
            raise InfeasibleError(f"the target {name} {word} {_show(model, name, lhs)} is not met: the model gives "
                                  f"{_show(model, name, rhs)} ('{e.eq.text}')", where=e.eq.where, variable=name)
        raise ContradictionError(
            f"your {name}={_show(model, name, lhs)} contradicts '{e.eq.text}': the model gives "
            f"{_show(model, name, rhs)}", where=e.eq.where, variable=name,
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

    seek = _needs_search(model, find, known, givens)
    if seek is not None:
        target, goal = seek
        return _search_solution(model, find, known, givens, target, goal)
    ex = _forward(model, known, find, sources)
    sol = Solution(model, find, ex.env, givens, ex.trace)
    return sol


def _needs_search(model: Model, find: tuple[str, ...], known: dict[str, float],
                  givens: Givens) -> tuple[str, str] | None:
    """(asked variable, given goal) when the answer must be searched for rather than computed.

    Two cases: the asked variable lies upstream of a given target (``limit:``), or reaching it
    would invert a floor/ceil or produce an integer from a continuous relation. The goal is the
    given whose removal leaves the asked variable free while the goal follows from it; rounded
    counts (users, replicas) and integers are preferred as goals.
    """
    def drives(x: str, g: str) -> bool:
        without = {k: v for k, v in known.items() if k != g}
        return g in _Problem(model, {**without, x: 1.0}, (g,)).matching.determined

    goals = [g for g in givens.limits if g in known]
    for x in find:
        for g in goals:
            without = {k: v for k, v in known.items() if k != g}
            probe = _Problem(model, without, find)
            if x in probe.known or x in probe.matching.determined:
                continue  # x follows forward without the goal
            if drives(x, g):
                return x, g
        if model.variables[x].choices:
            continue
        probe = _Problem(model, known, find)
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


def _invertible_path(model: Model, problem: _Problem, x: str) -> bool:
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
    return _smooth_in(e.lhs, x) and _smooth_in(e.rhs, x) and _upstream_smooth(model, problem, x)


def _upstream_smooth(model: Model, problem: _Problem, x: str) -> bool:
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
            if not (_smooth_in(e.lhs, v) and _smooth_in(e.rhs, v)):
                return False
        stack.extend(n for n in e.names if n != v and n not in problem.known)
    return True


def _search_solution(model: Model, find: tuple[str, ...], known: dict[str, float], givens: Givens, x: str,
                     goal: str) -> Solution:
    from .search import search

    return search(model, find, known, givens, x, goal)
