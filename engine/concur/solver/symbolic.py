"""The bridge between concur's expression trees and sympy (imported only to invert equations).

:func:`to_sympy` builds sympy objects from pre-made symbols (never ``sympify`` on text);
:func:`from_sympy` turns the solver's closed forms back into trees, so they can be cached on
disk and evaluated without sympy on the next run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..lang.expr import Bin, Call, Cmp, If, Logic, Neg, Node, Num, UnitLit, Var
from ..lang.functions import FUNCTIONS, Function, by_sympy_class

__all__ = ["from_sympy", "to_sympy"]


def _sym_number(sp: Any, v: float, exact_below: float) -> Any:
    """``v`` as a sympy Integer when it is a whole number under ``exact_below``, else a Float."""
    return sp.Integer(int(v)) if v.is_integer() and abs(v) < exact_below else sp.Float(v, 17)


def _sym_power(sp: Any, a: Any, b: Any) -> Any:
    """``a ** b`` with a float exponent made exact (an integer, else a rational), so sympy can
    simplify and invert through it."""
    if isinstance(b, sp.Float) and float(b).is_integer():
        b = sp.Integer(int(b))
    elif isinstance(b, sp.Float):
        b = sp.nsimplify(b, rational=True)
    return a**b


def _sym_bin(sp: Any, op: str, a: Any, b: Any) -> Any:
    """The sympy form of the binary operator ``op`` (``%`` is ``Mod``)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if op == "**":
        return _sym_power(sp, a, b)
    return sp.Mod(a, b)


def _sym_logic(sp: Any, op: str, parts: list[Any]) -> Any:
    """The sympy form of ``not``/``and``/``or`` over converted ``parts``."""
    if op == "not":
        return sp.Not(parts[0])
    return sp.And(*parts) if op == "and" else sp.Or(*parts)


def to_sympy(node: Node, symbols: dict[str, Any]) -> Any:
    """Convert a tree to sympy using pre-made ``symbols`` (never ``sympify``)."""
    import sympy as sp

    relations = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "==": sp.Eq, "!=": sp.Ne}

    def conv(n: Node) -> Any:
        if isinstance(n, Num):
            return _sym_number(sp, n.value, 1e15)
        if isinstance(n, UnitLit):
            return _sym_number(sp, n.value, 1e18)
        if isinstance(n, Var):
            return symbols[n.name]
        if isinstance(n, Neg):
            return -conv(n.arg)
        if isinstance(n, Bin):
            return _sym_bin(sp, n.op, conv(n.left), conv(n.right))
        if isinstance(n, Call):
            return FUNCTIONS[n.fn].sympy(*[conv(a) for a in n.args])
        if isinstance(n, Cmp):
            return relations[n.op](conv(n.left), conv(n.right))
        if isinstance(n, Logic):
            return _sym_logic(sp, n.op, [conv(a) for a in n.args])
        if isinstance(n, If):
            return sp.Piecewise((conv(n.then), conv(n.cond)), (conv(n.other), True))
        raise TypeError(n)

    return conv(node)


def _chain(op: str, parts: list[Node]) -> Node:
    """``parts`` joined left to right by the binary operator ``op``: ``((a op b) op c)``."""
    out = parts[0]
    for p in parts[1:]:
        out = Bin(op, out, p)
    return out


def _table_call(fn: Function, args: list[Node]) -> Node:
    """The call of table row ``fn`` on converted ``args``. A variadic function (min, max) nests
    binary calls; a two-argument ``log(x, b)`` is ``ln(x) / ln(b)``."""
    if fn.name == "ln" and len(args) == 2:
        return Bin("/", Call("ln", (args[0],)), Call("ln", (args[1],)))
    if fn.max_args > fn.min_args:
        out = args[0]
        for a in args[1:]:
            out = Call(fn.name, (out, a))
        return out
    return Call(fn.name, tuple(args))


class _FromSympy:
    """One conversion from sympy to a tree: :meth:`conv` dispatches to one method per sympy
    construct; every formula function goes through the function table (:func:`by_sympy_class`)."""

    def __init__(self) -> None:
        import sympy as sp

        self.sp = sp
        self.structural: list[tuple[Any, Callable[[Any], Node]]] = [
            (sp.Add, self.add),
            (sp.Mul, self.mul),
            (sp.Pow, self.power),
            (sp.Mod, lambda e: Bin("%", self.conv(e.args[0]), self.conv(e.args[1]))),
            (sp.Piecewise, self.piecewise),
            (sp.core.relational.Relational, lambda e: Cmp(e.rel_op, self.conv(e.lhs), self.conv(e.rhs))),
            (sp.And, lambda e: Logic("and", tuple(self.conv(a) for a in e.args))),
            (sp.Or, lambda e: Logic("or", tuple(self.conv(a) for a in e.args))),
            (sp.Not, lambda e: Logic("not", (self.conv(e.args[0]),))),
        ]

    def conv(self, e: Any) -> Node:
        """The tree of sympy expression ``e``; TypeError for what the language cannot say."""
        leaf = self.leaf(e)
        if leaf is not None:
            return leaf
        fn = by_sympy_class(e)
        if fn is not None:
            return _table_call(fn, [self.conv(a) for a in e.args])
        for cls, method in self.structural:
            if isinstance(e, cls):
                return method(e)
        raise TypeError(f"cannot convert {type(e).__name__} from sympy")

    def leaf(self, e: Any) -> Node | None:
        """A symbol, truth value or finite real constant as a tree; None for anything else."""
        sp = self.sp
        if isinstance(e, sp.Symbol):
            return Var(e.name)
        if e is sp.true or e is sp.false:
            return Cmp("==", Num(1.0), Num(1.0 if e is sp.true else 0.0))
        if e.is_Number:
            if e.is_real is False or e in (sp.oo, -sp.oo, sp.nan, sp.zoo):
                raise TypeError(f"non-finite or complex constant {e}")
            return Num(float(e))
        if e is sp.E:
            return Num(math.e)
        if e is sp.pi:
            return Num(math.pi)
        return None

    def add(self, e: Any) -> Node:
        return _chain("+", [self.conv(a) for a in e.args])

    def mul(self, e: Any) -> Node:
        """A product as numerator factors times, then divided by, each denominator factor."""
        sp = self.sp
        num: list[Node] = []
        den: list[Node] = []
        for a in e.args:
            if isinstance(a, sp.Pow) and a.exp.is_Number and a.exp < 0:
                den.append(self.conv(a.base ** (-a.exp)))
            elif isinstance(a, sp.Rational) and not a.is_Integer and a.p == 1:
                den.append(Num(float(a.q)))
            else:
                num.append(self.conv(a))
        out = _chain("*", num) if num else Num(1.0)
        return _chain("/", [out, *den])

    def power(self, e: Any) -> Node:
        """``sqrt`` for a half power, ``1 / b ** n`` for a negative one, else ``**``."""
        if e.exp == self.sp.Rational(1, 2):
            return Call("sqrt", (self.conv(e.base),))
        if e.exp.is_Number and e.exp < 0:
            return Bin("/", Num(1.0), self.conv(e.base ** (-e.exp)))
        return Bin("**", self.conv(e.base), self.conv(e.exp))

    def piecewise(self, e: Any) -> Node:
        """Nested ``if_`` from the last branch out; NaN where no branch applies."""
        tree: Node | None = None
        for value, cond in reversed(list(e.args)):
            if tree is None:
                tree = (
                    self.conv(value) if cond is self.sp.true else If(self.conv(cond), self.conv(value), Num(math.nan))
                )
            else:
                tree = If(self.conv(cond), self.conv(value), tree)
        assert tree is not None
        return tree


def from_sympy(expr: Any) -> Node:
    """Convert a sympy expression (from the solver) back to a tree; raises TypeError if unsupported."""
    return _FromSympy().conv(expr)
