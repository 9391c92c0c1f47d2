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
    "by_sympy_class",
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


def _sym(build: Callable[..., Any]) -> Callable[..., Any]:
    """The sympy constructor ``build(sympy, *args)``, importing sympy only when it is called."""

    def run(*args: Any) -> Any:
        import sympy

        return build(sympy, *args)

    return run


def _sym_class(class_name: str) -> Callable[..., Any]:
    """The sympy constructor that is the sympy class ``class_name`` itself (``Min``, ``floor``)."""
    return _sym(lambda sp, *args: getattr(sp, class_name)(*args))


def _sym_erlang(name: str) -> Callable[..., Any]:
    """The unevaluated sympy function of ``erlang_b``/``erlang_c`` (:mod:`concur.maths.symfuncs`)."""
    return lambda *args: erlang_function(name)(*args)


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

    Translation, read by :func:`concur.solver.symbolic.from_sympy` and
    :class:`concur.excel.printer.ExcelPrinter` (neither names a function itself):

    * ``sympy_class``: the name of the sympy class a call stays as in a sympy expression
      (``Min``, ``ceiling``, ``log``); None when sympy rewrites the call into other constructs
      (``sqrt(x)`` is ``Pow(x, 1/2)``, ``log2(x)`` is ``log(x)/log(2)``), which translate back
      through those constructs.
    * ``excel``: the sheet formula, a :meth:`str.format` template of the printed arguments:
      ``{0}``, ``{1}`` one argument, ``{args}`` all of them comma-separated. None with
      ``sympy_class`` None, except ``sqrt``, whose template prints ``Pow(x, 1/2)``.
    * ``snaps``: the argument is rounded to :data:`SNAP_DIGITS` significant digits first, in
      Python (``py``/``np``) and in the sheet alike (floor, ceil).
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
    sympy_class: str | None = None
    excel: str | None = None
    snaps: bool = False


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


_ERLANG_B_XL = "(_xlfn.POISSON.DIST({0},{1},FALSE)/_xlfn.POISSON.DIST({0},{1},TRUE))"
_POISSON_P = "_xlfn.POISSON.DIST({0},{1},FALSE)"
_POISSON_F = "_xlfn.POISSON.DIST(({0})-1,{1},TRUE)"
# erlang_c = c*P/(c*P + (c-A)*F(c-1)), 1 when A >= c (see concur.excel.printer)
_ERLANG_C_XL = f"IF(({{1}})>=({{0}}),1,({{0}})*{_POISSON_P}/(({{0}})*{_POISSON_P}+(({{0}})-({{1}}))*{_POISSON_F}))"

FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in [
        Function(
            "min",
            2,
            8,
            min,
            _np_minmax("minimum"),
            "same",
            _sym_class("Min"),
            doc="smallest argument",
            sympy_class="Min",
            excel="MIN({args})",
        ),
        Function(
            "max",
            2,
            8,
            max,
            _np_minmax("maximum"),
            "same",
            _sym_class("Max"),
            doc="largest argument",
            sympy_class="Max",
            excel="MAX({args})",
        ),
        Function(
            "floor",
            1,
            1,
            _floor,
            lambda x: _np().floor(_np_snap(x)),
            "count",
            _sym_class("floor"),
            smooth=False,
            doc="round down (after snapping to 12 significant digits)",
            sympy_class="floor",
            excel="_xlfn.FLOOR.MATH({0},1)",
            snaps=True,
        ),
        Function(
            "ceil",
            1,
            1,
            _ceil,
            lambda x: _np().ceil(_np_snap(x)),
            "count",
            _sym_class("ceiling"),
            smooth=False,
            doc="round up (after snapping to 12 significant digits)",
            sympy_class="ceiling",
            excel="_xlfn.CEILING.MATH({0},1)",
            snaps=True,
        ),
        Function(
            "sqrt",
            1,
            1,
            _guarded("sqrt", math.sqrt, Arg("x", 0.0)),
            _np_fn("sqrt"),
            "sqrt",
            _sym_class("sqrt"),
            doc="square root",
            args=(Arg("x", 0.0),),
            excel="SQRT({0})",
        ),
        Function(
            "exp",
            1,
            1,
            _guarded("exp", math.exp, Arg("x", hi=MAX_EXP)),
            _np_fn("exp"),
            "dimensionless",
            _sym_class("exp"),
            doc="e to the power x",
            args=(Arg("x", hi=MAX_EXP),),
            sympy_class="exp",
            excel="EXP({0})",
        ),
        Function(
            "ln",
            1,
            1,
            _guarded("ln", math.log, _POSITIVE),
            _np_fn("log"),
            "dimensionless",
            _sym_class("log"),
            doc="natural logarithm",
            args=(_POSITIVE,),
            sympy_class="log",
            excel="LN({0})",
        ),
        Function(
            "log2",
            1,
            1,
            _guarded("log2", math.log2, _POSITIVE),
            _np_fn("log2"),
            "dimensionless",
            _sym(lambda sp, x: sp.log(x, 2)),
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
            _sym(lambda sp, x: sp.log(x, 10)),
            doc="base-10 logarithm",
            args=(_POSITIVE,),
        ),
        Function(
            "abs",
            1,
            1,
            abs,
            _np_fn("abs"),
            "same",
            _sym_class("Abs"),
            doc="absolute value",
            sympy_class="Abs",
            excel="ABS({0})",
        ),
        Function(
            "erlang_b",
            2,
            2,
            _guarded("erlang_b", erlang.erlang_b, _SERVERS, _LOAD),
            _np_erlang("erlang_b"),
            "dimensionless",
            _sym_erlang("erlang_b"),
            smooth=False,
            doc="Erlang B blocking probability erlang_b(servers, load)",
            args=(_SERVERS, _LOAD),
            sympy_class="erlang_b",
            excel=_ERLANG_B_XL,
        ),
        Function(
            "erlang_c",
            2,
            2,
            _guarded("erlang_c", erlang.erlang_c, _SERVERS, _LOAD),
            _np_erlang("erlang_c"),
            "dimensionless",
            _sym_erlang("erlang_c"),
            smooth=False,
            doc="Erlang C probability of waiting erlang_c(servers, load)",
            args=(_SERVERS, _LOAD),
            sympy_class="erlang_c",
            excel=_ERLANG_C_XL,
        ),
    ]
}


def by_sympy_class(expr: Any) -> Function | None:
    """The row whose ``sympy_class`` ``expr`` is an instance of, by class name along its MRO
    (the way sympy's printers dispatch); None for any other sympy object. Imports no sympy."""
    for cls in type(expr).__mro__:
        for row in FUNCTIONS.values():
            if row.sympy_class == cls.__name__:
                return row
    return None
