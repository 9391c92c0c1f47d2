"""The bridge between concur's expression trees and sympy (imported only to invert equations).

:func:`to_sympy` builds sympy objects from pre-made symbols (never ``sympify`` on text);
:func:`from_sympy` turns the solver's closed forms back into trees, so they can be cached on
disk and evaluated without sympy on the next run.
"""

from __future__ import annotations

import math
from typing import Any

from ..lang.expr import Bin, Call, Cmp, If, Logic, Neg, Node, Num, UnitLit, Var
from ..lang.functions import FUNCTIONS

__all__ = ["from_sympy", "to_sympy"]


def to_sympy(node: Node, symbols: dict[str, Any]) -> Any:
    """Convert a tree to sympy using pre-made ``symbols`` (never ``sympify``)."""
    import sympy as sp

    def conv(n: Node) -> Any:
        if isinstance(n, Num):
            v = n.value
            return sp.Integer(int(v)) if v.is_integer() and abs(v) < 1e15 else sp.Float(v, 17)
        if isinstance(n, UnitLit):
            v = n.value
            return sp.Integer(int(v)) if v.is_integer() and abs(v) < 1e18 else sp.Float(v, 17)
        if isinstance(n, Var):
            return symbols[n.name]
        if isinstance(n, Neg):
            return -conv(n.arg)
        if isinstance(n, Bin):
            a, b = conv(n.left), conv(n.right)
            if n.op == "+":
                return a + b
            if n.op == "-":
                return a - b
            if n.op == "*":
                return a * b
            if n.op == "/":
                return a / b
            if n.op == "**":
                if isinstance(b, sp.Float) and float(b).is_integer():
                    b = sp.Integer(int(b))
                elif isinstance(b, sp.Float):
                    b = sp.nsimplify(b, rational=True)
                return a**b
            return sp.Mod(a, b)
        if isinstance(n, Call):
            return FUNCTIONS[n.fn].sympy(*[conv(a) for a in n.args])
        if isinstance(n, Cmp):
            a, b = conv(n.left), conv(n.right)
            return {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "==": sp.Eq, "!=": sp.Ne}[n.op](a, b)
        if isinstance(n, Logic):
            parts = [conv(a) for a in n.args]
            if n.op == "not":
                return sp.Not(parts[0])
            return sp.And(*parts) if n.op == "and" else sp.Or(*parts)
        if isinstance(n, If):
            return sp.Piecewise((conv(n.then), conv(n.cond)), (conv(n.other), True))
        raise TypeError(n)

    return conv(node)


def from_sympy(expr: Any) -> Node:
    """Convert a sympy expression (from the solver) back to a tree; raises TypeError if unsupported."""
    import sympy as sp

    def conv(e: Any) -> Node:
        if isinstance(e, sp.Symbol):
            return Var(e.name)
        if e is sp.true:
            return Cmp("==", Num(1.0), Num(1.0))
        if e is sp.false:
            return Cmp("==", Num(1.0), Num(0.0))
        if e.is_Number:
            if e.is_real is False or e in (sp.oo, -sp.oo, sp.nan, sp.zoo):
                raise TypeError(f"non-finite or complex constant {e}")
            return Num(float(e))
        if e is sp.E:
            return Num(math.e)
        if e is sp.pi:
            return Num(math.pi)
        if isinstance(e, sp.Add):
            args = [conv(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = Bin("+", out, a)
            return out
        if isinstance(e, sp.Mul):
            num, den = [], []
            for a in e.args:
                if isinstance(a, sp.Pow) and a.exp.is_Number and a.exp < 0:
                    den.append(conv(a.base ** (-a.exp)))
                elif isinstance(a, sp.Rational) and not a.is_Integer and a.p == 1:
                    den.append(Num(float(a.q)))
                else:
                    num.append(conv(a))
            out = num[0] if num else Num(1.0)
            for a in num[1:]:
                out = Bin("*", out, a)
            for d in den:
                out = Bin("/", out, d)
            return out
        if isinstance(e, sp.Pow):
            if e.exp == sp.Rational(1, 2):
                return Call("sqrt", (conv(e.base),))
            if e.exp.is_Number and e.exp < 0:
                return Bin("/", Num(1.0), conv(e.base ** (-e.exp)))
            return Bin("**", conv(e.base), conv(e.exp))
        if isinstance(e, sp.exp):
            return Call("exp", (conv(e.args[0]),))
        if isinstance(e, sp.log):
            if len(e.args) == 1:
                return Call("ln", (conv(e.args[0]),))
            return Bin("/", Call("ln", (conv(e.args[0]),)), Call("ln", (conv(e.args[1]),)))
        if isinstance(e, sp.Abs):
            return Call("abs", (conv(e.args[0]),))
        if isinstance(e, sp.floor):
            return Call("floor", (conv(e.args[0]),))
        if isinstance(e, sp.ceiling):
            return Call("ceil", (conv(e.args[0]),))
        if isinstance(e, (sp.Max, sp.Min)):
            name = "max" if isinstance(e, sp.Max) else "min"
            args = [conv(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = Call(name, (out, a))
            return out
        if isinstance(e, sp.Mod):
            return Bin("%", conv(e.args[0]), conv(e.args[1]))
        if isinstance(e, sp.Piecewise):
            tree: Node | None = None
            for value, cond in reversed(list(e.args)):
                if tree is None:
                    tree = conv(value) if cond is sp.true else If(conv(cond), conv(value), Num(math.nan))
                else:
                    tree = If(conv(cond), conv(value), tree)
            assert tree is not None
            return tree
        if isinstance(e, sp.core.relational.Relational):
            op = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}[e.rel_op]
            return Cmp(op, conv(e.lhs), conv(e.rhs))
        if isinstance(e, (sp.And, sp.Or)):
            return Logic("and" if isinstance(e, sp.And) else "or", tuple(conv(a) for a in e.args))
        if isinstance(e, sp.Not):
            return Logic("not", (conv(e.args[0]),))
        name = type(e).__name__
        if name in ("erlang_b", "erlang_c"):
            return Call(name, tuple(conv(a) for a in e.args))
        raise TypeError(f"cannot convert {name} from sympy")

    return conv(expr)
