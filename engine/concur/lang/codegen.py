"""Scalar expressions written as Python source: the form a search evaluates thousands of times.

:func:`~concur.lang.expr.compile_node` builds a tree of closures, one Python call per node per
evaluation. A torn loop's residual or an integer search runs the same forward formulas tens of
thousands of times, and there the call per node is most of the cost. :func:`expression_source`
writes one expression as one Python expression over ``env``; the code compiled from it runs
the same operations on the same values in the same order, so it gives the same float (and the
same ``bool`` from a comparison or a logical operator), and raises the same exceptions
(``KeyError`` for a missing name, ``ZeroDivisionError``/``OverflowError``/``ValueError`` for
arithmetic the values do not allow).

Invariants:

* **No text from a pack reaches the source.** Names, numbers, unit literals and functions are
  bound in the :class:`Namespace` and referred to by generated names (``_n0``, ``_k1``, ``_f2``);
  the source holds only those, operators and parentheses. A name is looked up as ``env[_n0]``,
  whatever characters it has.
* **Bounded nesting.** A subtree deeper than :data:`MAX_INLINE_DEPTH` is not written out: its
  closure is bound in the namespace and called (``_c3(env)``), so Python's parser never meets
  nesting beyond its limits, whatever shape a fold or an inversion gave the tree.
* **Operations as the closures do them.** ``+ - * / ** %`` and unary ``-`` are Python's operators,
  which is what :mod:`operator`'s functions are; ``<``, ``<=``, ``>``, ``>=`` likewise; ``==`` and
  ``!=`` (a relative tolerance) and every function call go through the very functions the closures
  call; ``and``/``or`` give ``True``/``False`` as ``all``/``any`` do, short-circuiting alike.
"""

from __future__ import annotations

from typing import Any

from .expr import Bin, Call, Cmp, If, Logic, Neg, Node, Num, UnitLit, Var, compile_node, scalar_comparison
from .functions import FUNCTIONS

__all__ = ["MAX_INLINE_DEPTH", "Namespace", "expression_source"]

MAX_INLINE_DEPTH = 40
"""Nesting written out as source; deeper subtrees are called as closures (Python's parser stops
at 200 nested parentheses)."""

_INLINE_CMP = frozenset({"<", "<=", ">", ">="})


class Namespace:
    """The globals of generated code: every value, name and function it refers to, by a generated name."""

    def __init__(self) -> None:
        self.globals: dict[str, Any] = {"__builtins__": {"float": float}}
        self._ids: dict[tuple[str, Any], str] = {}

    def bind(self, prefix: str, value: Any, key: Any = None) -> str:
        """A generated name for ``value`` (the same name for the same ``key``, default the value's id)."""
        k = (prefix, id(value) if key is None else key)
        name = self._ids.get(k)
        if name is None:
            name = self._ids[k] = f"_{prefix}{len(self._ids)}"
            self.globals[name] = value
        return name


def expression_source(node: Node, ns: Namespace, depth: int = 0) -> str:
    """``node`` as a Python expression over ``env``, binding what it refers to in ``ns``."""
    if depth > MAX_INLINE_DEPTH:
        return f"{ns.bind('c', compile_node(node))}(env)"
    sub = depth + 1
    if isinstance(node, (Num, UnitLit)):
        return ns.bind("k", node.value)
    if isinstance(node, Var):
        return f"env[{ns.bind('n', node.name, key=node.name)}]"
    if isinstance(node, Neg):
        return f"(-{expression_source(node.arg, ns, sub)})"
    if isinstance(node, Bin):
        return f"({expression_source(node.left, ns, sub)} {node.op} {expression_source(node.right, ns, sub)})"
    if isinstance(node, Call):
        args = ", ".join(expression_source(a, ns, sub) for a in node.args)
        return f"{ns.bind('f', FUNCTIONS[node.fn].py, key=node.fn)}({args})"
    if isinstance(node, Cmp):
        left, right = expression_source(node.left, ns, sub), expression_source(node.right, ns, sub)
        if node.op in _INLINE_CMP:
            return f"({left} {node.op} {right})"
        return f"{ns.bind('q', scalar_comparison(node.op), key=node.op)}({left}, {right})"
    if isinstance(node, Logic):
        parts = [expression_source(a, ns, sub) for a in node.args]
        if node.op == "not":
            return f"(not {parts[0]})"
        return f"(True if ({f' {node.op} '.join(parts)}) else False)"
    if isinstance(node, If):
        cond, then = expression_source(node.cond, ns, sub), expression_source(node.then, ns, sub)
        return f"({then} if {cond} else {expression_source(node.other, ns, sub)})"
    return f"{ns.bind('c', compile_node(node))}(env)"  # a string outside a choice: compile_node refuses it
