"""Closed forms: an equation solved for one variable, or a loop for all of its variables, once.

How it is designed, and why
---------------------------
A plan (:mod:`concur.solver.plan`) asks for a closed form whenever a block's unknown does not
stand alone on one side of its equation. Three ways to get one, cheapest first:

1. **Isolation** (:func:`isolate`, no sympy): when the unknown occurs exactly once, peel the
   operations around it -- ``a + x = b`` gives ``x = b - a``, ``a / x = b`` gives ``x = a / b``,
   ``x ** 2 = b`` gives ``x = ±b ** (1/2)``, ``exp(x) = b`` gives ``x = ln(b)``. This covers
   nearly every pack equation and costs microseconds, so a 1,000-equation chain solved
   backwards needs no sympy at all.
2. **sympy** for the rest (the unknown occurs twice, or sits in ``min``/``max``), with positive
   assumptions on the other names and the roots filtered later by bounds. sympy's answer is
   *complete* when it returns normally: an empty list then proves there is no solution
   (``c = c + a`` reduces to ``0 = -a``), and the solver says so instead of bracketing a
   rounding artefact. An exception or the budget's interrupt means *gave up*: the solver falls
   back to numeric bracketing.
3. **Loops** (:func:`solve_loop`): an algebraic loop of smooth equations is solved
   parametrically (the knowns as symbols), so its closed forms serve every later question with
   the same structure. A solution that leaves a loop variable free means the equations do not
   determine the loop (``a = b + c; b = a - c``): the plan reports what is missing.
4. **Large linear loops** (:func:`linear_rows`, no sympy): sympy's parametric solve of a loop of
   hundreds of equations would spend the whole budget, so a loop above
   :data:`SYMBOLIC_LOOP_LIMIT` equations that is linear in its unknowns becomes rows of
   coefficient expressions, and the run solves that system on the values (sparse elimination,
   :func:`concur.solver.blocks.solve_sparse`). Nothing of it is sympy, so nothing is cached.

What sympy finds is cached on disk as expression trees (JSON, :mod:`concur.cache`) keyed by the packs'
content, the specialised equation text and the variable, so a warm run never imports sympy.

Non-goals: inverting ``floor``/``ceil``/``erlang_*``/``%`` or comparisons (the solver searches
instead: :func:`smooth_in` says where), simplifying closed forms for display (the Excel printer
does that).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..cache import cache_dir, read_json, write_json
from ..lang.expr import Bin, Call, If, Neg, Node, Num, Var, to_text, walk
from ..lang.model import Model
from ..lang.serial import Malformed, decode, encode
from ..records import record
from .budget import Interrupted, interruptible, timed_out
from .problem import SpecialisedEq, smooth_in
from .symbolic import from_sympy, to_sympy

__all__ = [
    "ISOLATED_ROOT_LIMIT",
    "SYMBOLIC_DEGREE_LIMIT",
    "SYMBOLIC_LOOP_LIMIT",
    "SYMBOLIC_NODE_LIMIT",
    "Inversion",
    "LinearRow",
    "LoopForm",
    "degree",
    "invert",
    "isolate",
    "linear_rows",
    "save_closed_forms",
    "smooth_in",
    "solve_loop",
    "symbolic_size_ok",
]

SYMBOLIC_LOOP_LIMIT = 16
ISOLATED_ROOT_LIMIT = 16
"""Isolation keeps at most this many roots. Each ``abs`` or even power peeled doubles them (``x ** 2 =
t`` gives ``x = ±t ** (1/2)``), so a pack's ``abs(abs(...abs(x)...))`` or ``((x ** 2) ** 2) ** 2...``
forty deep would make 2^40 closed forms, each compiled and tried; past the limit the equation
goes to sympy (within :data:`SYMBOLIC_DEGREE_LIMIT`) or to numeric bracketing instead. The shipped
packs isolate one root per equation."""
SYMBOLIC_DEGREE_LIMIT = 8
"""sympy is attempted only on systems whose degree bound (the product of each equation's degree in
the unknowns, a square root counting 2: :func:`degree`) is at most this. A ring of three
``x_i = c + sqrt(x_j) / 2`` (bound 8) solves in well under a second; four (16) take minutes. Beyond
it the numeric paths answer: tears, bracketing. A structural limit, so the path a question takes
never depends on the machine's speed (:mod:`concur.solver.budget`)."""
SYMBOLIC_NODE_LIMIT = 400
"""sympy is attempted only on systems of at most this many expression nodes in all."""
"""Loops of more equations than this are never handed to sympy as a whole (the shipped packs'
largest is 11): linear ones are solved as a matrix on the values (:func:`linear_rows`), others
are torn or left to the budget."""


@record
class Inversion:
    """Closed forms of one variable from one equation. ``complete``: these are all the roots
    (so an empty tuple proves there is none); False when sympy gave up."""

    roots: tuple[Node, ...]
    complete: bool


@record
class LoopForm:
    """A loop solved for ``variables``: each branch is one closed form per variable, in order.

    ``status``: ``solved`` (branches hold every solution), ``none`` (proved: no solution),
    ``free`` (the equations leave ``free`` undetermined), ``gave up`` (no closed form).
    """

    variables: tuple[str, ...]
    branches: tuple[tuple[Node, ...], ...]
    status: str
    free: tuple[str, ...] = ()


@record
class _Table:
    """The closed forms known for one model, keyed by equation text and variable."""

    inversions: dict[str, Inversion]
    loops: dict[str, LoopForm]


_TABLE: _Table | None = None
_TABLE_MODEL = ""
_DIRTY = False


def _path(model: Model) -> str:
    return str(cache_dir() / f"closed-forms-{model.key}.json")


def _validate(data: Any) -> _Table:
    table: _Table = decode(data, _Table)
    for form in table.loops.values():
        if form.status not in ("solved", "none", "free", "gave up") or any(
            len(b) != len(form.variables) for b in form.branches
        ):
            raise Malformed("inconsistent loop form")
    return table


SHIPPED = Path(__file__).with_name("data") / "closed-forms.json"
"""Closed forms of the shipped packs' examples, so ``concur check`` runs them without sympy on a
fresh install (``python -m concur.solver.closed_form_table`` regenerates it; a test keeps it current)."""


def _shipped(key: str) -> _Table | None:
    try:
        data = json.loads(SHIPPED.read_text(encoding="utf-8"))
        return _validate(data[key]) if isinstance(data, dict) and key in data else None
    except (OSError, ValueError, Malformed):
        return None


def _table(model: Model) -> _Table:
    global _TABLE, _TABLE_MODEL
    if _TABLE is None or model.key != _TABLE_MODEL:
        _TABLE = read_json(_path(model), "closed-forms", _validate) or _Table({}, {})
        shipped = _shipped(model.key)
        if shipped is not None:
            for k, v in shipped.inversions.items():
                _TABLE.inversions.setdefault(k, v)
            for k, f in shipped.loops.items():
                _TABLE.loops.setdefault(k, f)
        _TABLE_MODEL = model.key
    return _TABLE


def save_closed_forms(model: Model) -> None:
    """Write newly found closed forms to the cache folder (a failure only costs recomputation)."""
    global _DIRTY
    if (
        _DIRTY
        and _TABLE is not None
        and model.key == _TABLE_MODEL
        and write_json(_path(model), "closed-forms", encode(_TABLE))
    ):
        _DIRTY = False


def _occurrences(node: Node, var: str) -> int:
    return sum(1 for n in walk(node) if isinstance(n, Var) and n.name == var)


_HALF = Num(0.5)


def isolate(lhs: Node, rhs: Node, var: str) -> tuple[Node, ...] | None:
    """Every root of ``lhs = rhs`` for ``var`` by peeling, when ``var`` occurs exactly once;
    None when it cannot (several occurrences, a function without an inverse here, or more than
    :data:`ISOLATED_ROOT_LIMIT` roots).

    >>> from concur.lang.expr import parse_equation, to_text
    >>> [to_text(r) for r in isolate(*parse_equation("t = a + k * b / r"), "r")]
    ['k * b / (t - a)']
    """
    if _occurrences(lhs, var) + _occurrences(rhs, var) != 1:
        return None
    side, other = (lhs, rhs) if _occurrences(lhs, var) else (rhs, lhs)
    targets: list[Node] = [other]
    while not (isinstance(side, Var) and side.name == var):
        peeled = _peel(side, targets, var)
        if peeled is None or len(peeled[1]) > ISOLATED_ROOT_LIMIT:
            return None
        side, targets = peeled
    return tuple(targets)


Peeled = tuple[Node, list[Node]]
"""One step of :func:`isolate`: the inner side still holding the variable, and what it equals."""


def _call_inverse(fn: str, t: Node) -> list[Node] | None:
    """The argument of one-argument function ``fn`` whose value is ``t`` (``abs`` has two);
    None when the variable cannot be peeled out of ``fn`` here."""
    if fn == "exp":
        return [Call("ln", (t,))]
    if fn == "ln":
        return [Call("exp", (t,))]
    if fn == "log2":
        return [Bin("**", Num(2.0), t)]
    if fn == "log10":
        return [Bin("**", Num(10.0), t)]
    if fn == "sqrt":
        return [Bin("**", t, Num(2.0))]
    if fn == "abs":
        return [t, Neg(t)]
    return None


def _peel(side: Node, targets: list[Node], var: str) -> Peeled | None:
    """Undo the outermost operation of ``side`` (which holds ``var`` once) on every target; None
    when it has no inverse here."""
    if isinstance(side, Neg):
        return side.arg, [Neg(t) for t in targets]
    if isinstance(side, Bin) and side.op in "+-*/":
        return _peel_arithmetic(side, targets, var)
    if isinstance(side, Bin) and side.op == "**":
        return _peel_power(side, targets, var)
    if isinstance(side, Call) and len(side.args) == 1:
        inverses = [_call_inverse(side.fn, t) for t in targets]
        if any(i is None for i in inverses):
            return None
        if side.fn == "abs":  # every target, then every negated target (the order roots are tried)
            return side.args[0], targets + [Neg(t) for t in targets]
        return side.args[0], [r for i in inverses for r in i or ()]
    return None


def _peel_arithmetic(side: Bin, targets: list[Node], var: str) -> Peeled:
    """``a + b``, ``a - b``, ``a * b``, ``a / b`` with ``var`` on one side: move the other across."""
    left_has = _occurrences(side.left, var) == 1
    inner, rest = (side.left, side.right) if left_has else (side.right, side.left)
    if side.op == "+":
        return inner, [Bin("-", t, rest) for t in targets]
    if side.op == "*":
        return inner, [Bin("/", t, rest) for t in targets]
    if side.op == "-":
        return inner, [Bin("+", t, rest) if left_has else Bin("-", rest, t) for t in targets]
    return inner, [Bin("*", t, rest) if left_has else Bin("/", rest, t) for t in targets]  # "/"


def _peel_power(side: Bin, targets: list[Node], var: str) -> Peeled | None:
    """``x ** p`` (a constant p; an even p has two roots) or ``a ** x`` (x = ln(t) / ln(a))."""
    if _occurrences(side.left, var) == 1 and isinstance(side.right, Num) and side.right.value != 0:
        p = side.right.value
        root = [Bin("**", t, Num(1.0 / p)) for t in targets]
        even = float(p).is_integer() and int(p) % 2 == 0
        return side.left, root + ([Neg(r) for r in root] if even else [])
    if _occurrences(side.right, var) == 1:  # a ** x = t: x = ln(t) / ln(a)
        return side.right, [Bin("/", Call("ln", (t,)), Call("ln", (side.left,))) for t in targets]
    return None


def _key(e: SpecialisedEq, var: str) -> str:
    return f"{e.eq.key}|{to_text(e.lhs)}={to_text(e.rhs)}|{var}"


def invert(model: Model, e: SpecialisedEq, var: str) -> Inversion:
    """Closed forms of ``var`` from ``e`` (isolation, else sympy; cached)."""
    global _DIRTY
    fast = isolate(e.lhs, e.rhs, var)
    if fast is not None:
        return Inversion(fast, True)
    table = _table(model)
    key = _key(e, var)
    hit = table.inversions.get(key)
    if hit is not None:
        return hit
    result = _sympy_inverse(e, var)
    if result.complete or result.roots:  # "gave up" on an interrupt is not cached: next time may have more budget
        table.inversions[key] = result
        _DIRTY = True
    return result


def _sympy_inverse(e: SpecialisedEq, var: str) -> Inversion:
    if not symbolic_size_ok([e], {var}):
        return Inversion((), False)
    try:
        with interruptible():
            import sympy as sp

            symbols = {n: sp.Symbol(n, positive=True) for n in e.names}
            symbols[var] = sp.Symbol(var, real=True)
            expr = to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols)
            expr = expr.rewrite(sp.Piecewise) if expr.has(sp.Max, sp.Min) else expr
            roots = sp.solve(expr, symbols[var], dict=False, check=False, rational=False)
            out: list[Node] = []
            complete = isinstance(roots, list)
            for r in roots if isinstance(roots, list) else []:
                try:
                    out.append(from_sympy(r))
                except TypeError:
                    complete = False  # a root we cannot evaluate: do not claim the list is complete
            return Inversion(tuple(out), complete)
    except Interrupted:
        raise timed_out(f"{var} from '{e.eq.text}'") from None
    except Exception:
        return Inversion((), False)


@record
class LinearRow:
    """One equation of a linear loop as ``sum(coefficient * unknown) + constant = 0``:
    ``coefficients`` pairs an unknown's position in the loop with an expression of the knowns."""

    coefficients: tuple[tuple[int, Node], ...]
    constant: Node


_ONE, _ZERO = Num(1.0), Num(0.0)


def _linear(node: Node, position: dict[str, int]) -> tuple[dict[int, Node], list[Node]] | None:
    """``node`` as (unknown position -> coefficient, constant terms), or None when it is not
    linear in the unknowns (a product of two of them, one inside a function or a power...)."""
    if isinstance(node, Var) and node.name in position:
        return {position[node.name]: _ONE}, []
    if not any(isinstance(n, Var) and n.name in position for n in walk(node)):
        return {}, [node]
    if isinstance(node, Neg):
        inner = _linear(node.arg, position)
        if inner is None:
            return None
        return {k: Neg(c) for k, c in inner[0].items()}, [Neg(t) for t in inner[1]]
    if not isinstance(node, Bin) or node.op not in "+-*/":
        return None
    left, right = _linear(node.left, position), _linear(node.right, position)
    if left is None or right is None:
        return None
    if node.op in "+-":
        return _linear_sum(left, right, node.op)
    # a product or a quotient is linear when the unknowns sit on one side and not in a divisor
    if node.op == "/":
        return None if right[0] else _scaled(left, "/", node.right)
    if left[0] and right[0]:
        return None
    return _scaled(left, "*", node.right) if left[0] else _scaled(right, "*", node.left)


Linear = tuple[dict[int, Node], list[Node]]
"""A linear form: unknown position -> coefficient, and the constant terms."""


def _linear_sum(left: Linear, right: Linear, op: str) -> Linear:
    """``left + right`` or ``left - right``, coefficients of one unknown added."""
    coefficients = dict(left[0])
    for k, c in right[0].items():
        c = c if op == "+" else Neg(c)
        coefficients[k] = Bin("+", coefficients[k], c) if k in coefficients else c
    return coefficients, left[1] + (right[1] if op == "+" else [Neg(t) for t in right[1]])


def _scaled(lin: Linear, op: str, scale: Node) -> Linear:
    """Every coefficient and constant of ``lin`` multiplied (``*``) or divided (``/``) by ``scale``."""
    return {k: Bin(op, c, scale) for k, c in lin[0].items()}, [Bin(op, t, scale) for t in lin[1]]


def linear_rows(eqs: list[SpecialisedEq], variables: list[str]) -> tuple[LinearRow, ...] | None:
    """The loop ``eqs`` as rows of a linear system in ``variables`` (``lhs - rhs`` per equation),
    or None when one of them is not linear in the unknowns. Pure tree work, no sympy: ``x2 = x1 + x0``
    in the unknowns (x1, x2) is the row ``-1 * x1 + 1 * x2 + (-x0) = 0``."""
    position = {v: k for k, v in enumerate(variables)}
    rows: list[LinearRow] = []
    for e in eqs:
        left, right = _linear(e.lhs, position), _linear(e.rhs, position)
        if left is None or right is None:
            return None
        coefficients = dict(left[0])
        for k, c in right[0].items():
            coefficients[k] = Bin("-", coefficients[k], c) if k in coefficients else Neg(c)
        terms = left[1] + [Neg(t) for t in right[1]]
        constant = terms[0] if terms else _ZERO
        for t in terms[1:]:
            constant = Bin("+", constant, t)
        rows.append(LinearRow(tuple(sorted(coefficients.items(), key=lambda kc: kc[0])), constant))
    return tuple(rows)


_TRANSCENDENTAL = ("exp", "ln", "log2", "log10", "min", "max", "floor", "ceil", "abs", "erlang_b", "erlang_c", "if")


def solve_loop(model: Model, eqs: list[SpecialisedEq], variables: list[str]) -> LoopForm:
    """The loop ``eqs`` solved for ``variables`` in closed form (cached), or why not."""
    global _DIRTY
    table = _table(model)
    key = "&".join(_key(e, v) for e, v in zip(eqs, variables))
    hit = table.loops.get(key)
    if hit is not None:
        return hit
    form = _sympy_loop(eqs, variables)
    if form.status != "gave up":
        table.loops[key] = form
        _DIRTY = True
    return form


def degree(node: Node, unknowns: set[str]) -> int | None:
    """A bound on the polynomial degree of ``node`` in ``unknowns`` once roots and divisions are
    cleared (a quotient adds its parts' degrees, ``sqrt`` and ``** (1/2)`` double, ``** k`` multiplies
    by ``|k|``); None when an unknown sits inside a transcendental function (``exp``, ``ln``).
    Structural, no sympy: it decides whether sympy is tried at all.

    >>> from concur.lang.expr import parse_equation
    >>> lhs, rhs = parse_equation("x = c + sqrt(y) / 2")
    >>> degree(lhs, {"x", "y"}), degree(rhs, {"x", "y"})
    (1, 2)
    """
    if not any(isinstance(n, Var) and n.name in unknowns for n in walk(node)):
        return 0
    if isinstance(node, Var):
        return 1
    if isinstance(node, Neg):
        return degree(node.arg, unknowns)
    if isinstance(node, Bin):
        return _degree_bin(node, unknowns)
    if isinstance(node, Call):
        return _degree_call(node, unknowns)
    if isinstance(node, If):
        parts = [degree(node.then, unknowns), degree(node.other, unknowns)]
        return None if None in parts else max(p or 0 for p in parts)
    return None


def _degree_bin(node: Bin, unknowns: set[str]) -> int | None:
    """A sum's largest degree, a product's or quotient's total, a constant power's multiple."""
    left, right = degree(node.left, unknowns), degree(node.right, unknowns)
    if left is None or right is None:
        return None
    if node.op in "+-":
        return max(left, right)
    if node.op in "*/":
        return left + right
    if node.op == "**" and isinstance(node.right, Num) and right == 0:
        from fractions import Fraction  # here: fractions loads decimal, which a forward plan never needs

        p = Fraction(node.right.value).limit_denominator(16)
        return left * max(abs(p.numerator), 1) * p.denominator
    return None


def _degree_call(node: Call, unknowns: set[str]) -> int | None:
    """``sqrt`` doubles, ``min``/``max``/``abs`` keep the largest; any other function: None."""
    args = [degree(a, unknowns) for a in node.args]
    if any(a is None for a in args):
        return None
    if node.fn == "sqrt":
        return 2 * (args[0] or 0)
    if node.fn in ("min", "max", "abs"):
        return max(a or 0 for a in args)
    return None


def symbolic_size_ok(eqs: list[SpecialisedEq], unknowns: set[str]) -> bool:
    """Whether sympy is tried on ``eqs`` in ``unknowns``: at most :data:`SYMBOLIC_NODE_LIMIT` nodes
    and a degree bound (the product over equations) of at most :data:`SYMBOLIC_DEGREE_LIMIT`."""
    nodes, bound = 0, 1
    for e in eqs:
        nodes += sum(1 for _ in walk(e.lhs)) + sum(1 for _ in walk(e.rhs))
        sides = [degree(e.lhs, unknowns), degree(e.rhs, unknowns)]
        if None in sides:
            return False
        bound *= max(max(d or 0 for d in sides), 1)
        if nodes > SYMBOLIC_NODE_LIMIT or bound > SYMBOLIC_DEGREE_LIMIT:
            return False
    return True


def _transcendental(node: Node) -> bool:
    return any((isinstance(n, Call) and n.fn in _TRANSCENDENTAL) or isinstance(n, If) for n in walk(node))


def _sympy_loop(eqs: list[SpecialisedEq], variables: list[str]) -> LoopForm:
    names: set[str] = set()
    for e in eqs:
        names |= e.names
    if any(_transcendental(e.lhs) or _transcendental(e.rhs) for e in eqs):
        return LoopForm(tuple(variables), (), "gave up")  # sympy can spend minutes here: tear numerically
    if not symbolic_size_ok(eqs, set(variables)):
        return LoopForm(tuple(variables), (), "gave up")
    try:
        with interruptible():
            import sympy as sp

            symbols = {n: sp.Symbol(n, positive=True) if n not in variables else sp.Symbol(n, real=True) for n in names}
            system = [to_sympy(e.lhs, symbols) - to_sympy(e.rhs, symbols) for e in eqs]
            unknown = [symbols[v] for v in variables]
            solutions = sp.solve(system, unknown, dict=True)
            branches: list[tuple[Node, ...]] = []
            free: set[str] = set()
            for sol in solutions:
                missing = [v for v in variables if symbols[v] not in sol]
                loose = {s.name for expr in sol.values() for s in expr.free_symbols if s.name in variables}
                if missing or loose:
                    free |= set(missing) | loose
                    continue
                try:
                    branches.append(tuple(from_sympy(sol[symbols[v]]) for v in variables))
                except TypeError:
                    return LoopForm(tuple(variables), (), "gave up")
            if free and not branches:
                return LoopForm(tuple(variables), (), "free", tuple(sorted(free)))
            return LoopForm(tuple(variables), tuple(branches), "solved" if branches else "none")
    except Interrupted:
        raise timed_out("the loop " + ", ".join(variables)) from None
    except Exception:
        return LoopForm(tuple(variables), (), "gave up")


def start_recording(model: Model) -> None:
    """Record, from now on, only the closed forms questions on ``model`` need (the shipped-table tool)."""
    global _TABLE, _TABLE_MODEL
    _TABLE, _TABLE_MODEL = _Table({}, {}), model.key


def stop_recording() -> Any:
    """What was recorded since :func:`start_recording`, encoded (None if nothing); recording ends."""
    global _TABLE
    table, _TABLE = _TABLE, None
    return encode(table) if table is not None and (table.inversions or table.loops) else None
