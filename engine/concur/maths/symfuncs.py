"""sympy Function classes for the formula language's non-elementary functions.

``erlang_b(servers, load)`` and ``erlang_c(servers, load)`` stay unevaluated in
symbolic work (sympy cannot invert them, so the solver searches numerically)
and evaluate through :mod:`concur.maths.erlang` when all arguments are numbers.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from . import erlang

__all__ = ["erlang_function"]


@cache
def erlang_function(name: str) -> Any:
    import sympy as sp

    def _eval_evalf(self: Any, prec: int) -> Any:
        args = [a.evalf(prec) for a in self.args]
        if all(a.is_Number for a in args):
            return sp.Float(getattr(erlang, name)(float(args[0]), float(args[1])), prec)
        return None

    return type(name, (sp.Function,), {"nargs": 2, "_eval_evalf": _eval_evalf})
