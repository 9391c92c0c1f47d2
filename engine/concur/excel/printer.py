"""Print sympy expressions as Excel formulas that mean what Python means.

How is this designed, and why?
------------------------------
SymPy has no Excel printer, and the obvious ``str(expr)`` with ``**`` turned
into ``^`` is wrong in three quiet ways: spreadsheets bind unary minus tighter
than ``^`` (``=-2^2`` is 4, Python's ``-2**2`` is -4), ``^`` is left-associative
(``=2^3^2`` is 64, Python gives 512), and ``LOG`` is base 10. So
:class:`ExcelPrinter` is a small :class:`sympy.printing.printer.Printer`
subclass with one method per construct and a fixed set of rules:

* powers are ``POWER(b,e)`` (``SQRT(b)`` for ``e = 1/2``), so ``^`` never
  appears and its precedence cannot bite; a negative exponent inside a product
  becomes a division (``x*y**-2`` prints ``x/POWER(y,2)``);
* a negative term or factor is always parenthesised: ``(-x)``, ``(-5)``,
  ``(-3/4)``; subtraction prints as ``a-b``;
* ``log`` is ``LN``, ``exp`` is ``EXP``, ``Abs`` ``ABS``, ``Max``/``Min``
  ``MAX``/``MIN``, ``Mod`` ``MOD`` (both take the sign of the divisor),
  ``Piecewise`` a nested ``IF`` (``NA()`` when no branch applies),
  relations ``= <> < <= > >=`` and ``AND/OR/NOT``;
* ``floor``/``ceiling`` are ``_xlfn.FLOOR.MATH(SNAP(x),1)`` and
  ``_xlfn.CEILING.MATH(SNAP(x),1)`` -- the ``_xlfn.`` prefix is required, or
  Excel and LibreOffice show ``#NAME?``; the significance is explicit;
* numbers are *tidied* before printing (:func:`tidy`): a float becomes the shortest exact
  rational that rounds to it (``0.0002777777777777778`` is ``1/3600``, ``0.7`` is ``7/10``), so
  unit factors cancel exactly instead of leaving ``1056269593800965053637369973213/10...``;
  a rational coefficient prints as a division (``x/3600``, ``2500*cost/(9*tokens)``), or as a
  short decimal when it has one (``0.75*x``, ``2.5E-07*x``); no printed literal has more
  than 15 significant digits (a spreadsheet keeps no more), ``pi`` is ``PI()``;
* ``erlang_b(c, A)`` uses the identity B = P(c; A) / F(c; A) with the Poisson
  probability and distribution functions, ``_xlfn.POISSON.DIST`` (measured in
  LibreOffice 7.4 against the Python recurrence: relative error <= 3e-13 for
  c <= 1000 and A <= 2c; when A is so far above c that both Poisson terms
  underflow -- c = 1000, A = 5000 -- the cell shows ``#DIV/0!``);
  ``erlang_c(c, A)`` is ``c*P/(c*P + (c-A)*F(c-1))``, 1 when A >= c;
* symbols print as their defined name (mangled by :mod:`concur.excel.names`);
  anything else raises :class:`UnprintableError` naming the construct.

The formula functions' Excel forms (``LN``, ``MAX``, the ``FLOOR.MATH`` and ``POISSON.DIST``
formulas above) are not written here: each is its row's ``excel`` template in the function
table, :data:`concur.lang.functions.FUNCTIONS`, found by the sympy class the call stays as
(``sympy_class``), so a new function is one row.

Snapping (why ``SNAP``)
-----------------------
``0.1*3/0.1`` is ``3.0000000000000004`` in IEEE doubles: Python's ``ceil``
says 4, LibreOffice's ``CEILING.MATH`` says 3 (spreadsheets round to ~15
digits inside rounding functions). Both sides therefore round the argument to
12 significant digits before ``ceil``/``floor``: in the sheet
``ROUND(x,MIN(300,11-INT(LOG10(ABS(x)+1E-300))))`` and in Python
:func:`snap`, which computes the same thing. Worked example:
x = 3.0000000000000004, LOG10(x) = 0.477, INT = 0, ROUND(x, 11) = 3, ceil 3 on
both sides. ``+1E-300`` keeps ``LOG10`` finite at x = 0 (then ROUND(0, 300) = 0);
``MIN(300, ...)`` keeps the digit count in range for tiny values.

Non-goals: common-subexpression helper cells (formulas are cell-sized for the
packs concur ships; :func:`excel_formula` refuses anything over Excel's 8,192
character limit), array formulas, and evaluating anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import sympy
from sympy.printing.printer import Printer
from sympy.printing.pycode import PythonCodePrinter

from ..lang.functions import FUNCTIONS, SNAP_DIGITS, Function, by_sympy_class, snap  # one snapping rule
from .cells import MAX_FORMULA_LENGTH, UnprintableError  # without sympy, for the sheet writers

__all__ = [
    "MAX_DIGITS",
    "MAX_FORMULA_LENGTH",
    "ExcelPrinter",
    "UnprintableError",
    "erlang_b_value",
    "erlang_c_value",
    "exact",
    "excel_formula",
    "py_eval",
    "py_function",
    "snap",
    "snap_formula",
    "tidy",
]

MAX_DIGITS = 15  # significant digits a spreadsheet keeps; no printed literal has more
_REL_TOL = 1e-14  # a float "is" a rational this close to it (unit factors are a few ulps off)
_SHORT_RATIONAL = 10  # digits of p and q together: 1/2629800 is a unit factor, 4115227/33333339 noise

# Precedence levels of printed text (higher binds tighter).
_REL = 10
_ADD = 20
_MUL = 30
_ATOM = 100


def _digits(r: sympy.Rational) -> int:
    p, q = abs(int(r.p)), int(r.q)
    return len(str(p)) + (len(str(q)) if q != 1 else 0)


def _simplest(x: float) -> sympy.Rational | None:
    """The first continued-fraction convergent of ``x`` within ``_REL_TOL`` (None if none is short)."""
    from fractions import Fraction

    target = Fraction(x)
    h0, h1, k0, k1 = 0, 1, 1, 0
    rest = target
    for _ in range(40):
        a = rest.numerator // rest.denominator
        h0, h1 = h1, a * h1 + h0
        k0, k1 = k1, a * k1 + k0
        if abs(Fraction(h1, k1) - target) <= abs(target) * Fraction(_REL_TOL):
            return sympy.Rational(h1, k1)
        frac = rest - a
        if frac == 0:
            return sympy.Rational(h1, k1)
        rest = 1 / frac
    return None


def exact(x: float) -> sympy.Number:
    """The number a float stands for: an integer, the shortest nearby rational, or the float.

    Unit factors are rationals that pint computed in floating point (``1/3600`` arrives as
    ``0.0002777777777777778``); pack constants are short decimals (``0.7``). Whichever of the
    decimal the float prints as and the simplest rational within 1e-14 has fewer digits wins
    (``0.123456789`` stays that decimal),
    so exact arithmetic can cancel them; a float with no short form stays a float.

        >>> exact(1 / 3600), exact(0.7), exact(2.0**30)
        (1/3600, 7/10, 1073741824)
    """
    v = float(x)
    if not math.isfinite(v):
        return sympy.Float(v)
    if v.is_integer() and abs(v) < 2**63:
        return sympy.Integer(int(v))
    decimal = sympy.Rational(repr(v))
    significant = len(repr(abs(v)).lower().split("e")[0].replace(".", "").strip("0"))
    simple = _simplest(v)
    if simple is not None and _digits(simple) < significant and _digits(simple) <= _SHORT_RATIONAL:
        return simple
    return decimal if significant <= MAX_DIGITS else sympy.Float(v)


def tidy(expr: Any) -> Any:
    """``expr`` with every float replaced by :func:`exact`, so rational factors cancel.

    A number multiplying an ``if_`` moves into its branches, where it can cancel the unit
    factor each branch carries (``1E-12*IF(c,1E12*a,...)`` becomes ``IF(c,a,...)``).
    """
    if not isinstance(expr, sympy.Basic):
        return expr
    floats = expr.atoms(sympy.Float)
    if floats:
        expr = expr.xreplace({f: exact(float(f)) for f in floats})
    if expr.has(sympy.Piecewise):
        expr = expr.replace(_number_times_piecewise, _into_branches)
    return expr


def _number_times_piecewise(e: Any) -> bool:
    return (
        isinstance(e, sympy.Mul) and len(e.args) == 2 and e.args[0].is_Number and isinstance(e.args[1], sympy.Piecewise)
    )


def _into_branches(e: Any) -> Any:
    c, pw = e.args
    return sympy.Piecewise(*[(c * value, cond) for value, cond in pw.args])


def _decimal_text(v: float) -> str:
    """``v`` with at most ``MAX_DIGITS`` significant digits, Excel style (``1.5E-07``)."""
    text = repr(v)
    mantissa = text.lower().split("e")[0].replace("-", "").replace(".", "").lstrip("0")
    if len(mantissa) > MAX_DIGITS:
        text = format(v, f".{MAX_DIGITS}g")
    return text.replace("e", "E")


def _short_decimal(r: sympy.Rational) -> str | None:
    """``r`` as a decimal when that is exact and short (``3/2`` -> ``1.5``), else None."""
    q = int(r.q)
    while q % 2 == 0:
        q //= 2
    while q % 5 == 0:
        q //= 5
    if q != 1:
        return None
    text = _decimal_text(float(r))
    return text if len(text.lstrip("-")) <= 7 else None


def snap_formula(body: str) -> str:
    """The sheet formula text of :func:`concur.lang.functions.snap` applied to formula ``body``."""
    return f"ROUND({body},MIN(300,{SNAP_DIGITS - 1}-INT(LOG10(ABS({body})+1E-300))))"


class ExcelPrinter(Printer):  # type: ignore[misc]  # sympy ships no type hints: Printer is Any
    """Print a sympy expression as an Excel formula body (no leading ``=``).

    ``names`` maps each symbol name to the text that stands for it in the
    sheet (a defined name, a cell reference, or a parenthesised sub-formula).
    """

    printmethod = "_excel"
    _default_settings: ClassVar[dict[str, Any]] = {"names": {}, "order": None}

    def __init__(self, names: Mapping[str, str]):
        super().__init__({"names": dict(names)})
        self._names: dict[str, str] = dict(names)

    # -- structure -----------------------------------------------------
    def emptyPrinter(self, expr: Any) -> str:
        raise UnprintableError(
            f"cannot print {type(expr).__name__} ({expr}) as an Excel formula",
            hint=f"supported: + - * / powers, {', '.join(FUNCTIONS)}, mod, if_, comparisons",
        )

    def _print(self, expr: Any, **kwargs: Any) -> str:
        """A formula function prints from its row of the function table (``excel``); any other
        construct by sympy's dispatch to the ``_print_*`` methods below."""
        fn = by_sympy_class(expr)
        if fn is not None and fn.excel is not None:
            return self._print_call(fn, expr.args, type(expr).__name__)
        return super()._print(expr, **kwargs)  # type: ignore[no-any-return]  # sympy is untyped

    def _print_call(self, fn: Function, args: tuple[Any, ...], shown: str) -> str:
        """``fn``'s ``excel`` template filled with the printed arguments (snapped first when the
        function snaps); a fixed-arity function refuses any other number of arguments."""
        if fn.min_args == fn.max_args and len(args) != fn.min_args:
            takes = ", ".join(a.name for a in fn.args) or "x"
            raise UnprintableError(f"{shown} takes ({takes}), got {len(args)} arguments")
        texts = [self._print(a) for a in args]
        if fn.snaps:
            texts = [snap_formula(t) for t in texts]
        assert fn.excel is not None
        return fn.excel.format(*texts, args=",".join(texts))

    def _prec(self, expr: Any) -> int:
        if isinstance(expr, sympy.Add):
            return _ADD
        if isinstance(expr, sympy.Mul):
            c, _ = expr.as_coeff_Mul()
            return _ATOM if c.is_number and c.is_negative else _MUL
        if isinstance(expr, sympy.core.relational.Relational):
            return _REL
        return _ATOM

    def _paren(self, expr: Any, level: int) -> str:
        text = self._print(expr)
        return f"({text})" if self._prec(expr) < level else text

    def _args(self, args: Any) -> str:
        return ",".join(self._print(a) for a in args)

    # -- atoms ---------------------------------------------------------
    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        try:
            return self._names[expr.name]
        except KeyError:
            raise UnprintableError(
                f"symbol '{expr.name}' has no cell or defined name in this workbook",
                variable=expr.name,
                hint="every symbol in a derived expression must be a plan input or an earlier derived variable",
            ) from None

    def _print_Integer(self, expr: sympy.Integer) -> str:
        digits = str(abs(int(expr)))
        if len(digits) > MAX_DIGITS:
            return self._print_Float(sympy.Float(float(expr)))
        zeros = len(digits) - len(digits.rstrip("0"))
        if len(digits) >= 9 and zeros >= 6:  # 1E+12, not 1000000000000 (count the zeros...)
            text = f"{digits.rstrip('0')}E+{zeros:02d}"
            return f"(-{text})" if expr < 0 else text
        return f"(-{-int(expr)})" if expr < 0 else str(int(expr))

    def _print_Rational(self, expr: sympy.Rational) -> str:
        p, q = int(expr.p), int(expr.q)
        if _digits(expr) > MAX_DIGITS:
            return self._print_Float(sympy.Float(float(expr)))
        short = _short_decimal(expr)
        if short is not None:
            return f"(-{short.lstrip('-')})" if p < 0 else short
        return f"(-{-p}/{q})" if p < 0 else f"({p}/{q})"

    def _print_Float(self, expr: sympy.Float) -> str:
        v = float(expr)
        if not math.isfinite(v):
            raise UnprintableError(f"cannot print the non-finite number {v!r} in a formula")
        text = _decimal_text(abs(v))
        return f"(-{text})" if v < 0 else text

    def _print_Infinity(self, expr: Any) -> str:
        raise UnprintableError("cannot print infinity in a formula", hint="bound the expression")

    _print_NegativeInfinity = _print_Infinity
    _print_ComplexInfinity = _print_Infinity
    _print_NaN = _print_Infinity

    def _print_Pi(self, expr: Any) -> str:
        return "PI()"

    def _print_Exp1(self, expr: Any) -> str:
        return "EXP(1)"

    def _print_BooleanTrue(self, expr: Any) -> str:
        return "TRUE"

    def _print_BooleanFalse(self, expr: Any) -> str:
        return "FALSE"

    def _print_Str(self, expr: Any) -> str:
        return '"' + str(expr.name).replace('"', '""') + '"'

    # -- arithmetic ----------------------------------------------------
    def _print_Add(self, expr: sympy.Add) -> str:
        terms = self._as_ordered_terms(expr, order=None)
        # a - b reads better than (-b)+a: start with the first term that is not negative
        lead = next((t for t in terms if not t.could_extract_minus_sign()), None)
        if lead is not None:
            terms = [lead] + [t for t in terms if t is not lead]
        out = []
        for i, term in enumerate(terms):
            if i and term.could_extract_minus_sign():
                out.append("-" + self._paren(-term, _MUL))
            elif i:
                out.append("+" + self._paren(term, _ADD + 1))
            else:
                out.append(self._paren(term, _ADD))
        return "".join(out)

    def _print_Mul(self, expr: sympy.Mul) -> str:
        coeff, rest = expr.as_coeff_Mul()
        if coeff.is_number and coeff.is_negative:
            return "(-" + self._print(-expr) + ")"
        num: list[Any] = []
        den: list[Any] = []
        if (
            coeff.is_Rational
            and not coeff.is_Integer
            and _digits(coeff) <= MAX_DIGITS
            and ((coeff.p == 1 and coeff.q <= 10000) or _short_decimal(coeff) is None)
        ):
            if coeff.p != 1:
                num.append(sympy.Integer(coeff.p))
            den.append(sympy.Integer(coeff.q))
        elif coeff != 1:
            num.append(coeff)
        for f in sympy.Mul.make_args(rest):
            if f.is_Pow and f.exp.is_number and f.exp.is_negative:
                den.append(sympy.Pow(f.base, -f.exp))
            else:
                num.append(f)
        num_text = "*".join(self._paren(f, _MUL) for f in num) if num else "1"
        if not den:
            return num_text
        if len(den) == 1:
            return f"{num_text}/{self._paren(den[0], _MUL + 1)}"
        return num_text + "/(" + "*".join(self._paren(f, _MUL) for f in den) + ")"

    def _print_Pow(self, expr: sympy.Pow) -> str:
        base, exp = expr.as_base_exp()
        if exp.is_number and exp.is_negative:
            return "(1/" + self._paren(sympy.Pow(base, -exp), _ATOM) + ")"
        if exp == sympy.S.Half:
            return self._print_call(FUNCTIONS["sqrt"], (base,), "sqrt")
        return f"POWER({self._print(base)},{self._print(exp)})"

    def _print_Mod(self, expr: Any) -> str:
        return f"MOD({self._args(expr.args)})"

    # -- logic ---------------------------------------------------------
    def _print_Piecewise(self, expr: sympy.Piecewise) -> str:
        tail = "NA()"
        for value, cond in reversed(expr.args):
            if cond == sympy.true:
                tail = self._print(value)
            else:
                tail = f"IF({self._print(cond)},{self._print(value)},{tail})"
        return tail

    def _relation(self, expr: Any, op: str) -> str:
        return f"{self._paren(expr.lhs, _ADD)}{op}{self._paren(expr.rhs, _ADD)}"

    def _print_Equality(self, expr: Any) -> str:
        return self._relation(expr, "=")

    def _print_Unequality(self, expr: Any) -> str:
        return self._relation(expr, "<>")

    def _print_StrictLessThan(self, expr: Any) -> str:
        return self._relation(expr, "<")

    def _print_LessThan(self, expr: Any) -> str:
        return self._relation(expr, "<=")

    def _print_StrictGreaterThan(self, expr: Any) -> str:
        return self._relation(expr, ">")

    def _print_GreaterThan(self, expr: Any) -> str:
        return self._relation(expr, ">=")

    def _print_And(self, expr: Any) -> str:
        return f"AND({self._args(expr.args)})"

    def _print_Or(self, expr: Any) -> str:
        return f"OR({self._args(expr.args)})"

    def _print_Not(self, expr: Any) -> str:
        return f"NOT({self._print(expr.args[0])})"

    def _print_Function(self, expr: Any) -> str:
        return self.emptyPrinter(expr)  # a function outside the table (sin, an undefined f)


def excel_formula(expr: Any, names: Mapping[str, str]) -> str:
    """Excel formula body (no ``=``) for sympy ``expr`` with symbols mapped by ``names``.

    Raises :class:`UnprintableError` for unsupported constructs, unknown
    symbols, or a formula longer than Excel's 8,192 characters.

        >>> import sympy
        >>> x = sympy.Symbol("x")
        >>> excel_formula(-x**2, {"x": "x"})
        '(-POWER(x,2))'
    """
    expr = tidy(sympy.sympify(expr) if not isinstance(expr, sympy.Basic) else expr)
    text = cast(str, ExcelPrinter(names).doprint(expr))  # sympy's Printer.doprint is untyped
    if len(text) + 1 > MAX_FORMULA_LENGTH:
        raise UnprintableError(
            f"formula is {len(text) + 1} characters, over Excel's limit of {MAX_FORMULA_LENGTH}",
            hint="split the equation into intermediate variables",
        )
    return text


# -- the Python twin of what the sheet computes ---------------------------


def erlang_b_value(servers: float, load: float) -> float:
    """Erlang B blocking probability by the stable recurrence B(k) = A B(k-1) / (k + A B(k-1))."""
    b = 1.0
    for k in range(1, int(servers) + 1):
        b = load * b / (k + load * b)
    return b


def erlang_c_value(servers: float, load: float) -> float:
    """Erlang C waiting probability from Erlang B; 1 when load >= servers."""
    c = int(servers)
    if load >= c:
        return 1.0
    b = erlang_b_value(c, load)
    return c * b / (c - load * (1 - b))


class _ChoicePrinter(PythonCodePrinter):  # type: ignore[misc]  # untyped sympy, as ExcelPrinter
    """Python code printer that keeps a choice's text a string (``attention == 'mla'``)."""

    def _print_Str(self, expr: Any) -> str:
        return repr(str(expr.name))


def py_function(expr: Any) -> Callable[[Mapping[str, float]], float]:
    """``expr`` compiled once into a Python function of a name -> value mapping.

    The sheet's semantics: ``floor``/``ceiling`` snap their argument first (:func:`snap`),
    Erlang functions use :func:`erlang_b_value`/:func:`erlang_c_value`; a relation gives 1.0
    or 0.0; a choice variable's value is its text (``Eq(attention, Str("mla"))``). For evaluating
    one expression many times (a candidate table checked before it is written); raises what
    the arithmetic raises (ZeroDivisionError, ValueError, OverflowError).
    """
    syms = sorted(expr.free_symbols, key=lambda s: s.name)
    own = {
        "ceiling": lambda x: float(math.ceil(snap(x))),
        "floor": lambda x: float(math.floor(snap(x))),
        "erlang_b": erlang_b_value,
        "erlang_c": erlang_c_value,
    }
    printer = _ChoicePrinter(
        {
            "fully_qualified_modules": False,
            "inline": True,
            "allow_unknown_functions": True,
            "user_functions": {k: k for k in own},
        }
    )
    fn = sympy.lambdify(syms, expr, modules=[own, "math"], printer=printer)
    names = [s.name for s in syms]
    return lambda values: float(fn(*[v if isinstance(v := values[n], str) else float(v) for n in names]))


def py_eval(expr: Any, values: Mapping[str, float]) -> float:
    """Evaluate ``expr`` in Python floats with the sheet's semantics (see :func:`py_function`).

    For tests and spot checks; the engine's compiled sweeps use the same rules.
    """
    return py_function(expr)(values)
