"""Partial evaluation of a sweep's formulas: fold what does not vary, once per plan.

How it is designed, and why
---------------------------
A sweep evaluates the same block formulas at every point, but most of each formula does not
vary. In ``compute_time = [2 flop/parameter/token] * active_params_per_gpu * concurrency *
[token/request] / peak_flops`` only ``concurrency`` is an array; evaluated as written, left to
right, that is three full-array multiplications and a full-array division. Folded, it is one
multiplication of the array by a constant computed once when the plan is built.

:func:`fold` walks an expression tree knowing which names hold scalars (givens, defaults and
blocks already folded) and returns either a :class:`Const` or a closure over arrays:

* products and quotients are flattened into ``constant x numerators / denominators``: the
  constant is multiplied out at plan time, a constant of 1 costs nothing, and a quotient with no
  array numerator is one ``constant / array`` operation;
* sums and differences are flattened the same way into ``constant + positives - negatives``;
* a call, comparison or ``if_`` whose arguments are all constant becomes a constant (evaluated
  with the same numpy function the array path uses, so the semantics agree).

Worked example (Llama-3.1-8B bf16 on H100, concurrency swept): ``compute_time`` folds to
``concurrency x 1.6232e-5 s/request`` (one operation instead of four); ``memory_time =
(weights_read + concurrency x avg_context x kv_per_token) / hbm_bandwidth`` to two array
operations and a division (``avg_context x kv_per_token = 2.684e8 B/request`` is folded);
``tokens_per_s_per_gpu = tokens_per_s / (tp x pp)`` to one. The whole ``tokens_per_s_per_gpu``
chain costs 16 array operations, about as many as the hand-written numpy expression.

:func:`flag_safe` says whether a tree can only produce a non-finite value from finite inputs by
raising a floating-point flag (overflow, divide by zero, invalid). For such trees the sweep skips
the per-variable finiteness scan and watches the flags instead (see :mod:`concur.sweep.vector`).

Consequences: results differ from left-to-right evaluation only by rounding (relative 1e-15);
a constant that folds to a non-finite value raises :class:`NotFoldable`, so the caller keeps the
unfolded closure and its checks. Non-goals: common-subexpression elimination across blocks,
algebraic simplification beyond flattening (sympy already gave the closed forms), code generation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..lang.expr import (
    Bin,
    Call,
    Cmp,
    If,
    Logic,
    Neg,
    Node,
    Num,
    Str,
    UnitLit,
    Var,
    compile_node,
    names_in,
    walk,
)
from ..lang.functions import FUNCTIONS

__all__ = ["Const", "NotFoldable", "flag_safe", "fold"]

Closure = Callable[[dict[str, Any]], Any]

# Functions whose numpy form turns finite inputs into a non-finite output only with a raised FP
# flag. floor/ceil snap their argument under their own errstate and erlang_* run custom code, so
# they are left out: a block using them is always checked point by point.
_FLAG_SAFE_FUNCTIONS = frozenset({"min", "max", "sqrt", "exp", "ln", "log2", "log10", "abs"})


class NotFoldable(ValueError):
    """A constant folded to a non-finite value; evaluate the tree unfolded instead."""


@dataclass(frozen=True)
class Const:
    """A folded value (base units)."""

    value: float


def flag_safe(node: Node) -> bool:
    """True when every operation in ``node`` raises an FP flag on its way to a non-finite value."""
    for n in walk(node):
        if isinstance(n, Call) and n.fn not in _FLAG_SAFE_FUNCTIONS:
            return False
        if isinstance(n, (Logic, Str)):
            return False
    return True


def fold(node: Node, scalars: Mapping[str, Any]) -> Const | Closure:
    """Fold ``node`` given the scalar values in ``scalars``; other names are read from the env.

    Returns a :class:`Const` when nothing in ``node`` varies, else a closure ``f(env) -> array``.
    Raises :class:`NotFoldable` when a folded constant is not finite.
    """
    import numpy as np

    with np.errstate(all="ignore"):
        return _fold(node, scalars)


def _const(value: Any) -> Const:
    v = float(value)
    if not math.isfinite(v):
        raise NotFoldable(v)
    return Const(v)


def _fold(node: Node, scalars: Mapping[str, Any]) -> Const | Closure:
    import numpy as np

    if isinstance(node, (Num, UnitLit)):
        return _const(node.value)
    if isinstance(node, Var):
        if node.name in scalars:
            return _const(scalars[node.name])
        name = node.name
        return lambda env: env[name]
    if isinstance(node, Neg) or (isinstance(node, Bin) and node.op in "*/"):
        return _product(node, scalars)
    if isinstance(node, Bin) and node.op in "+-":
        return _sum(node, scalars)
    if isinstance(node, Bin):
        left, right = _fold(node.left, scalars), _fold(node.right, scalars)
        ufunc = np.power if node.op == "**" else np.mod
        return _apply(ufunc, [left, right])
    if isinstance(node, Call) and node.fn in _FLAG_SAFE_FUNCTIONS:
        return _apply(FUNCTIONS[node.fn].np, [_fold(a, scalars) for a in node.args])
    if isinstance(node, If):
        cond = _fold(node.cond, scalars)
        if isinstance(cond, Const):
            return _fold(node.then if cond.value else node.other, scalars)
        return _apply(np.where, [cond, _fold(node.then, scalars), _fold(node.other, scalars)])
    if isinstance(node, Cmp) and not isinstance(node.left, Str) and not isinstance(node.right, Str):
        compiled = compile_node(Cmp(node.op, Var("\0l"), Var("\0r")), vector=True)
        return _apply(
            lambda a, b: compiled({"\0l": a, "\0r": b}), [_fold(node.left, scalars), _fold(node.right, scalars)]
        )
    compiled = compile_node(node, vector=True)  # anything else: evaluated as written
    if names_in(node) <= scalars.keys():
        try:
            return _const(compiled(dict(scalars)))
        except (TypeError, ValueError, KeyError, ArithmeticError):
            pass  # left to the sweep, which reports the failure per point
    return lambda env: compiled({**scalars, **env})


def _apply(fn: Callable[..., Any], parts: list[Const | Closure]) -> Const | Closure:
    """``fn`` over folded parts: a constant when every part is one, else a closure."""
    if all(isinstance(p, Const) for p in parts):
        return _const(fn(*[p.value for p in parts]))  # type: ignore[union-attr]
    getters = [(lambda env, v=p.value: v) if isinstance(p, Const) else p for p in parts]
    if len(getters) == 1:
        (g0,) = getters
        return lambda env: fn(g0(env))
    if len(getters) == 2:
        g0, g1 = getters
        return lambda env: fn(g0(env), g1(env))
    return lambda env: fn(*[g(env) for g in getters])


def _product(node: Node, scalars: Mapping[str, Any]) -> Const | Closure:
    const, num, den = 1.0, [], []  # type: ignore[var-annotated]

    def collect(n: Node, up: bool) -> None:
        nonlocal const
        if isinstance(n, Neg):
            const = -const
            collect(n.arg, up)
        elif isinstance(n, Bin) and n.op in "*/":
            collect(n.left, up)
            collect(n.right, up if n.op == "*" else not up)
        else:
            part = _fold(n, scalars)
            if isinstance(part, Const):
                const = const * part.value if up else const / part.value if part.value else math.inf
            else:
                (num if up else den).append(part)

    collect(node, True)
    const = _const(const).value
    if not num and not den:
        return Const(const)
    if num:
        head = num[0]
        first = head if const == 1.0 else (lambda env: head(env) * const)
        rest_num = num[1:]
    else:
        d0 = den[0]
        first = lambda env: const / d0(env)
        rest_num, den = [], den[1:]
    f = first
    for g in rest_num:
        f = lambda env, f=f, g=g: f(env) * g(env)
    for g in den:
        f = lambda env, f=f, g=g: f(env) / g(env)
    return f


def _sum(node: Node, scalars: Mapping[str, Any]) -> Const | Closure:
    const, pos, neg = 0.0, [], []  # type: ignore[var-annotated]

    def collect(n: Node, up: bool) -> None:
        nonlocal const
        if isinstance(n, Bin) and n.op in "+-":
            collect(n.left, up)
            collect(n.right, up if n.op == "+" else not up)
        else:
            part = _fold(n, scalars)
            if isinstance(part, Const):
                const = const + part.value if up else const - part.value
            else:
                (pos if up else neg).append(part)

    collect(node, True)
    const = _const(const).value
    if not pos and not neg:
        return Const(const)
    if pos:
        head = pos[0]
        f = head if const == 0.0 else (lambda env: head(env) + const)
        rest, negs = pos[1:], neg
    else:
        n0 = neg[0]
        f = lambda env: const - n0(env)
        rest, negs = [], neg[1:]
    for g in rest:
        f = lambda env, f=f, g=g: f(env) + g(env)
    for g in negs:
        f = lambda env, f=f, g=g: f(env) - g(env)
    return f
