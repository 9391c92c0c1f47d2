"""The fixed function table of the formula language: one row per function.

Each :class:`Function` says, in one place, how many arguments it takes, how to
evaluate it on floats and on numpy arrays, how its dimensions combine, and how
it becomes a sympy expression. The parser, the unit checker, the evaluators
and the solver all read this table; nothing else defines a function.

Dimension rules:

* ``same``: all arguments share one dimension, which is the result's (min, max, abs).
* ``count``: like ``same`` for one argument, which must be a pure count
  (dimensionless or tokens/requests/users/...: base factor 1), so that
  rounding in base units equals rounding in the declared unit (floor, ceil).
* ``dimensionless``: arguments and result dimensionless (exp, ln, log2, log10, erlang_*).
* ``sqrt``: halves the exponents.
* ``if``: condition of any dimension; both branches share the result's.

``floor`` and ``ceil`` *snap* their argument to 12 significant digits first, so
that ``ceil(0.1*3/0.1)`` is 3 in Python exactly as in a spreadsheet.

Admissible ranges: each row declares, per argument, the closed range it accepts
(:class:`Arg`). Outside it a value is refused, not computed: ``exp`` above 700 overflows a
double, and ``erlang_b``/``erlang_c`` cost one step per server, so ``erlang_b(1e9, 1e9)``
would run for minutes. ``concur check`` flags a constant argument out of range
(:func:`out_of_range`); at evaluation the scalar functions raise
:class:`~concur.errors.InfeasibleError` (exit 3) naming the function, the argument and the
range, and the array versions of ``erlang_*`` refuse any element out of range the same way.
Bounds are inclusive; NaN is outside every range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import InfeasibleError
from ..maths import erlang
from ..maths.symfuncs import erlang_function
from ..records import record

__all__ = [
    "FUNCTIONS",
    "MAX_EXP",
    "MAX_LOAD",
    "MAX_SERVERS",
    "SNAP_DIGITS",
    "Arg",
    "Function",
    "out_of_range",
    "snap",
]

MAX_SERVERS = 1e6  # erlang_*: the recurrence costs one step per server (about 60 ms at 1e6)
MAX_LOAD = 1e9  # erlang_*: offered load in erlang
MAX_EXP = 700.0  # exp(709.8) is the largest double

SNAP_DIGITS = 12


def snap(x: float) -> float:
    """Round ``x`` to :data:`SNAP_DIGITS` significant digits, exactly as the workbook's formula
    ``ROUND(x, MIN(300, 11 - INT(LOG10(ABS(x) + 1E-300))))`` does (:mod:`concur.excel.printer`).

    ``snap(0.1*3/0.1) == 3.0``; 0 and non-finite values pass through.
    """
    if not math.isfinite(x):
        return x
    return round(x, min(300, SNAP_DIGITS - 1 - math.floor(math.log10(abs(x) + 1e-300))))


def _np() -> Any:
    import numpy

    return numpy


def _np_snap(x: Any) -> Any:
    np = _np()
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(x == 0, 0, np.floor(np.log10(np.abs(np.where(x == 0, 1, x)))))
        scale = 10.0 ** (SNAP_DIGITS - 1 - mag)
        return np.where(np.isfinite(x) & (x != 0), np.round(x * scale) / scale, x)


def _floor(x: float) -> float:
    return float(math.floor(snap(x)))


def _ceil(x: float) -> float:
    return float(math.ceil(snap(x)))


def _np_erlang(name: str) -> Callable[..., Any]:
    def run(servers: Any, load: Any) -> Any:
        np = _np()
        for spec, values in zip(FUNCTIONS[name].args, (servers, load)):
            arr = np.asarray(values, dtype=float)
            outside = ~((arr >= spec.lo) & (arr <= spec.hi))
            if outside.any():
                raise spec.refusal(name, float(arr[outside].flat[0]))

        vec = getattr(erlang, f"{name}_array", None)
        if vec is not None:
            return vec(servers, load)
        f = np.vectorize(getattr(erlang, name), otypes=[float])
        return f(servers, load)

    return run


def _sym(name: str) -> Callable[..., Any]:
    """Build the sympy constructor for ``name`` lazily (sympy is imported only here)."""

    def build(*args: Any) -> Any:
        import sympy as sp

        if name == "min":
            return sp.Min(*args)
        if name == "max":
            return sp.Max(*args)
        if name == "floor":
            return sp.floor(args[0])
        if name == "ceil":
            return sp.ceiling(args[0])
        if name == "sqrt":
            return sp.sqrt(args[0])
        if name == "exp":
            return sp.exp(args[0])
        if name == "ln":
            return sp.log(args[0])
        if name == "log2":
            return sp.log(args[0], 2)
        if name == "log10":
            return sp.log(args[0], 10)
        if name == "abs":
            return sp.Abs(args[0])
        if name in ("erlang_b", "erlang_c"):
            return erlang_function(name)(*args)
        raise KeyError(name)

    return build


@record
class Arg:
    """One argument's name and the range of values the function accepts: [lo, hi], or (lo, hi]
    when ``open_lo`` (logarithms need x > 0)."""

    name: str
    lo: float = -math.inf
    hi: float = math.inf
    open_lo: bool = False

    def admits(self, x: float) -> bool:
        return (self.lo < x if self.open_lo else self.lo <= x) and x <= self.hi  # False for NaN

    @property
    def range_text(self) -> str:
        def show(v: float) -> str:
            return f"{int(v):,}" if v.is_integer() and abs(v) < 1e15 else f"{v:g}"

        lo = "(-inf" if self.lo == -math.inf else ("(" if self.open_lo else "[") + show(self.lo)
        hi = "inf)" if self.hi == math.inf else show(self.hi) + "]"
        return f"{lo}, {hi}"

    def refusal(self, fn: str, x: float) -> InfeasibleError:
        return InfeasibleError(
            f"{fn}() {self.name} = {x:g} is outside its admissible range {self.range_text}",
            hint=f"check the values that feed {fn}()",
        )


@record
class Function:
    """One function of the formula language (see the module docstring for ``dims`` and ``args``).

    ``py`` checks ``args`` (the admissible ranges) before computing; ``args`` is empty for
    functions defined on every real (min, max, abs, floor, ceil).
    """

    name: str
    min_args: int
    max_args: int
    py: Callable[..., float]
    np: Callable[..., Any]
    dims: str
    sympy: Callable[..., Any]
    smooth: bool = True  # False: the solver never inverts through it (floor, ceil)
    doc: str = ""
    args: tuple[Arg, ...] = ()


def _guarded(name: str, impl: Callable[..., float], *args: Arg) -> Callable[..., float]:
    """``impl`` refusing, with :class:`InfeasibleError`, any argument outside its :class:`Arg` range."""
    if len(args) == 1:
        (a0,) = args

        def one(x: float) -> float:
            if not a0.admits(x):
                raise a0.refusal(name, x)
            return impl(x)

        return one

    def many(*xs: float) -> float:
        for spec, x in zip(args, xs):
            if not spec.admits(x):
                raise spec.refusal(name, x)
        return impl(*xs)

    return many


def out_of_range(fn: str, index: int, value: float) -> str | None:
    """Why constant ``value`` cannot be argument ``index`` of ``fn`` (None when it can)."""
    spec = FUNCTIONS[fn].args[index] if index < len(FUNCTIONS[fn].args) else None
    if spec is None or spec.admits(value):
        return None
    return f"{fn}() {spec.name} = {value:g} is outside its admissible range {spec.range_text}"


def _np_fn(attr: str) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        return getattr(_np(), attr)(*args)

    return run


def _np_minmax(attr: str) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        np = _np()
        out = args[0]
        for a in args[1:]:
            out = getattr(np, attr)(out, a)
        return out

    return run


_POSITIVE = Arg("x", 0.0, open_lo=True)
_SERVERS = Arg("servers", 0.0, MAX_SERVERS)
_LOAD = Arg("load", 0.0, MAX_LOAD)


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in [
        Function("min", 2, 8, min, _np_minmax("minimum"), "same", _sym("min"), doc="smallest argument"),
        Function("max", 2, 8, max, _np_minmax("maximum"), "same", _sym("max"), doc="largest argument"),
        Function(
            "floor",
            1,
            1,
            _floor,
            lambda x: _np().floor(_np_snap(x)),
            "count",
            _sym("floor"),
            smooth=False,
            doc="round down (after snapping to 12 significant digits)",
        ),
        Function(
            "ceil",
            1,
            1,
            _ceil,
            lambda x: _np().ceil(_np_snap(x)),
            "count",
            _sym("ceil"),
            smooth=False,
            doc="round up (after snapping to 12 significant digits)",
        ),
        Function(
            "sqrt",
            1,
            1,
            _guarded("sqrt", math.sqrt, Arg("x", 0.0)),
            _np_fn("sqrt"),
            "sqrt",
            _sym("sqrt"),
            doc="square root",
            args=(Arg("x", 0.0),),
        ),
        Function(
            "exp",
            1,
            1,
            _guarded("exp", math.exp, Arg("x", hi=MAX_EXP)),
            _np_fn("exp"),
            "dimensionless",
            _sym("exp"),
            doc="e to the power x",
            args=(Arg("x", hi=MAX_EXP),),
        ),
        Function(
            "ln",
            1,
            1,
            _guarded("ln", math.log, _POSITIVE),
            _np_fn("log"),
            "dimensionless",
            _sym("ln"),
            doc="natural logarithm",
            args=(_POSITIVE,),
        ),
        Function(
            "log2",
            1,
            1,
            _guarded("log2", math.log2, _POSITIVE),
            _np_fn("log2"),
            "dimensionless",
            _sym("log2"),
            doc="base-2 logarithm",
            args=(_POSITIVE,),
        ),
        Function(
            "log10",
            1,
            1,
            _guarded("log10", math.log10, _POSITIVE),
            _np_fn("log10"),
            "dimensionless",
            _sym("log10"),
            doc="base-10 logarithm",
            args=(_POSITIVE,),
        ),
        Function("abs", 1, 1, abs, _np_fn("abs"), "same", _sym("abs"), doc="absolute value"),
        Function(
            "erlang_b",
            2,
            2,
            _guarded("erlang_b", erlang.erlang_b, _SERVERS, _LOAD),
            _np_erlang("erlang_b"),
            "dimensionless",
            _sym("erlang_b"),
            smooth=False,
            doc="Erlang B blocking probability erlang_b(servers, load)",
            args=(_SERVERS, _LOAD),
        ),
        Function(
            "erlang_c",
            2,
            2,
            _guarded("erlang_c", erlang.erlang_c, _SERVERS, _LOAD),
            _np_erlang("erlang_c"),
            "dimensionless",
            _sym("erlang_c"),
            smooth=False,
            doc="Erlang C probability of waiting erlang_c(servers, load)",
            args=(_SERVERS, _LOAD),
        ),
    ]
}
