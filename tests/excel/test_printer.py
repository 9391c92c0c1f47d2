"""The sympy -> Excel printer: every trap of spreadsheet exporters (LibreOffice checks in test_recalc.py)."""

from __future__ import annotations

import math

import pytest
import sympy as sp

from concur.errors import ConcurError
from concur.excel.printer import (
    UnprintableError,
    erlang_b_value,
    erlang_c_value,
    excel_formula,
    py_eval,
    snap,
    snap_formula,
)

x, y, z = sp.symbols("x y z")
NAMES = {"x": "x", "y": "y", "z": "z"}


def xl(expr):
    return excel_formula(expr, NAMES)


def test_unary_minus_power_is_parenthesised():
    # Spreadsheets read =-x^2 as (-x)^2; Python's -x**2 is -(x**2).
    assert xl(-(x**2)) == "(-POWER(x,2))"
    assert "^" not in xl(-(x**2))


def test_power_tower_is_right_associative():
    # =2^3^2 is 64 in a spreadsheet; 2**3**2 is 512 in Python.
    tower = sp.Pow(2, sp.Pow(3, 2, evaluate=False), evaluate=False)
    assert xl(tower) == "POWER(2,POWER(3,2))"
    assert xl(x**y**z) == "POWER(x,POWER(y,z))"


def test_sqrt_and_negative_exponents_become_division():
    assert xl(sp.sqrt(x)) == "SQRT(x)"
    assert xl(x * y**-2) == "x/POWER(y,2)"
    assert xl(1 / (x + y)) == "(1/(x+y))"
    assert xl((x + y) / (y - z)) == "(x+y)/(y-z)"
    assert xl(x / (2 * y)) == "x/(2*y)"
    assert xl(x**-1.5) == "(1/POWER(x,1.5))"


def test_subtraction_and_negative_terms():
    assert xl(x - y) == "x-y"
    assert xl(x - 2 * y * z) == "x-2*y*z"
    assert xl(-x * y) == "(-x*y)"
    assert xl(x * (y + z)) == "x*(y+z)"


def test_numbers_rationals_and_floats():
    assert xl(sp.Rational(3, 4) * x) == "0.75*x"  # a short decimal reads better than 3*x/4
    assert xl(sp.Rational(2, 3) * x) == "2*x/3" and xl(x / 3600) == "x/3600"
    assert xl(sp.Rational(-1, 3) + x) in ("(-1/3)+x", "x-(1/3)", "x-1/3")
    assert xl(sp.Float(2.5e-7) * x) == "2.5E-07*x"
    assert xl(sp.Float(0.1) + x) == "x+0.1"
    assert xl(sp.Integer(-5) + x) == "x-5"
    assert xl(sp.pi * x) == "PI()*x"


def test_unit_factors_cancel_and_no_literal_is_longer_than_what_it_stands_for():
    from concur.excel.printer import exact, tidy

    hour, month = 1 / 3600, 1 / 2629800  # what pint hands over for usd/hour and usd/month
    assert exact(hour) == sp.Rational(1, 3600) and exact(0.0013689253935660506) == sp.Rational(2, 1461)
    assert exact(0.7) == sp.Rational(7, 10) and exact(2.0**30) == 2**30
    assert exact(0.123456789) == sp.Rational(123456789, 10**9)  # no short rational: the decimal stays
    # cost_per_month = cost_per_hour * hours_per_month, shown in usd/month: the factor is exactly 1
    c, h = sp.symbols("c h")
    scaled = tidy(sp.Float(hour) * c * sp.Float(0.0013689253935660506) * h / sp.Float(month))
    assert excel_formula(scaled, {"c": "c", "h": "h"}) == "c*h"
    assert excel_formula(sp.Float(hour) * c * 1_000_000, {"c": "c"}) == "2500*c/9"
    assert xl(sp.Float(1 / 3) * x) == "x/3"
    assert xl(sp.Float(0.1234567890123456789) * x) == "0.123456789012346*x"  # 15 digits at most
    assert xl(sp.Rational(10**20 + 1, 3) * x).count("E") == 1


def test_log_is_ln_never_log10():
    assert xl(sp.log(x)) == "LN(x)"
    assert xl(sp.log(x, 2)) == "LN(x)/LN(2)"
    assert "LOG(" not in xl(sp.log(x) + sp.exp(x))
    assert xl(sp.exp(-x)) == "EXP((-x))"


def test_mod_max_min_abs():
    assert xl(sp.Mod(x, 3)) == "MOD(x,3)"
    assert xl(sp.Max(1, x, y)).startswith("MAX(") and xl(sp.Min(x, y)) == "MIN(x,y)"
    assert xl(sp.Abs(x - y)) == "ABS(x-y)"


def test_nested_piecewise_is_nested_if():
    pw = sp.Piecewise((x, x < 1), (y, x < 2), (z, True))
    assert xl(pw) == "IF(x<1,x,IF(x<2,y,z))"
    assert xl(sp.Piecewise((x, x > 0))) == "IF(x>0,x,NA())"


def test_relations():
    assert xl(sp.Piecewise((1, sp.Eq(x, y)), (0, True))) == "IF(x=y,1,0)"
    assert xl(sp.Piecewise((1, sp.Ne(x, y)), (0, True))) == "IF(x<>y,1,0)"
    assert xl(sp.Piecewise((1, sp.Ge(x + 1, y)), (0, True))) == "IF(y<=x+1,1,0)"  # sympy orders it
    assert xl(sp.Piecewise((1, sp.And(x <= y, y > z)), (0, True))) == "IF(AND(x<=y,y>z),1,0)"


def test_ceil_and_floor_are_prefixed_snapped_and_explicit():
    text = xl(sp.ceiling(x * y / z))
    assert text == "_xlfn.CEILING.MATH(" + snap_formula("x*y/z") + ",1)"
    assert xl(sp.floor(x)).startswith("_xlfn.FLOOR.MATH(ROUND(x,")


def test_snap_agrees_with_the_sheet_on_the_ceil_trap():
    raw = 0.1 * 3 / 0.1
    assert raw == 3.0000000000000004 and math.ceil(raw) == 4  # the trap
    assert snap(raw) == 3.0
    assert py_eval(sp.ceiling(x * y / z), {"x": 0.1, "y": 3, "z": 0.1}) == 3.0
    assert py_eval(sp.floor(x * y / z), {"x": 0.7, "y": 10, "z": 1}) == 7.0  # 6.999999999999999


@pytest.mark.parametrize("value", [0.0, 1.0, -2.5, 123456789.123456789, 1e-250, 6.02e23, float("inf")])
def test_snap_keeps_twelve_significant_digits(value):
    s = snap(value)
    if math.isfinite(value) and value:
        assert math.isclose(s, value, rel_tol=1e-11)
    else:
        assert s == value


def test_erlang_functions_print_through_poisson_dist():
    eb = sp.Function("erlang_b")(x, y)
    ec = sp.Function("erlang_c")(x, y)
    assert xl(eb) == "(_xlfn.POISSON.DIST(x,y,FALSE)/_xlfn.POISSON.DIST(x,y,TRUE))"
    assert xl(ec).startswith("IF((y)>=(x),1,")
    assert math.isclose(erlang_b_value(10, 8), 0.1216610642529515, rel_tol=1e-12)
    # M/M/c textbook value: 2 servers, load 1 -> P(wait) = 1/3
    assert math.isclose(erlang_c_value(2, 1.0), 1 / 3, rel_tol=1e-12)
    assert erlang_c_value(2, 2.5) == 1.0


def test_unknown_symbol_is_a_clear_error():
    with pytest.raises(UnprintableError, match="symbol 'q' has no cell") as info:
        excel_formula(sp.Symbol("q") + x, NAMES)
    assert isinstance(info.value, ConcurError)


@pytest.mark.parametrize("expr", [sp.sin(x), sp.Function("mystery")(x), sp.oo * x, sp.I * x])
def test_unsupported_constructs_raise(expr):
    with pytest.raises(UnprintableError, match="cannot print"):
        xl(expr)


def test_formula_over_excel_length_limit_is_refused():
    big = sum(sp.Symbol(f"v{i}") for i in range(1500))
    names = {f"v{i}": f"name_{i}" for i in range(1500)}
    with pytest.raises(UnprintableError, match="over Excel's limit"):
        excel_formula(big, names)


def test_symbols_print_as_their_defined_names():
    assert excel_formula(sp.Symbol("cpu2") * 2, {"cpu2": "v_cpu2"}) == "2*v_cpu2"
