"""bracket_root: evaluations that fail are skipped during the bisection too, not only on the scan.

Found by tests/solver/test_fuzz_every_pack.py: a torn loop's residual raised ZeroDivisionError at
a bisection midpoint (roots.py, ``fm = f(mid)`` unguarded), and ``concur.solve`` ended in a
traceback instead of an answer or a ConcurError.
"""

from __future__ import annotations

import math

import pytest

from concur.solver.roots import bracket_root


def test_a_pole_at_a_bisection_midpoint_is_not_a_traceback():
    # The scan over [0, 2] sees 1/(x - 0.995) at 0.99 (-200) and 1.0 (+200): a sign change whose
    # first midpoint is the pole itself.
    assert bracket_root(lambda x: 1 / (x - 0.995), 0.0, 2.0) is None


def test_a_failed_inner_solve_at_a_midpoint_is_skipped():
    def f(x: float) -> float:
        if x == 0.995:
            raise ValueError("the inner solve failed here")  # what the tear's residual raises
        return x - 0.995

    assert bracket_root(f, 0.0, 2.0) is None


def test_a_pole_does_not_hide_a_later_root():
    # A pole at 0.995 (a bisection midpoint) before the true root at 1.5.
    def f(x: float) -> float:
        return (x - 1.5) / (x - 0.995)

    root = bracket_root(f, 0.0, 2.0)
    assert root == pytest.approx(1.5)


def test_an_infinite_midpoint_gives_up_that_sign_change():
    assert bracket_root(lambda x: -1.0 if x < 0.995 else (math.inf if x == 0.995 else 1.0), 0.0, 2.0) is None


def test_plain_roots_are_still_found():
    assert bracket_root(lambda x: x * x - 2, 0.0, 2.0) == pytest.approx(math.sqrt(2))
    assert bracket_root(lambda x: math.log(x) - 3, 1e-9, 1e15) == pytest.approx(math.exp(3))


class _Counted:
    """``f`` with a count of its evaluations (each may be a whole inner solve of a torn loop)."""

    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, x: float) -> float:
        self.calls += 1
        return self.f(x)


def test_the_scan_stops_at_the_first_sign_change():
    # A root at 1e-6 on a 1e-9..1e15 range sits at scan point 25 of 201: the scan ends there and
    # bisection takes the rest, so the later points are never evaluated.
    f = _Counted(lambda x: math.log(x / 1e-6))
    assert bracket_root(f, 1e-9, 1e15) == pytest.approx(1e-6)
    assert f.calls < 26 + 60


def test_the_lazy_scan_returns_the_root_a_full_scan_would():
    # Three sign changes: the first from the low end wins, as it did when every point was scanned.
    f = _Counted(lambda x: (x - 0.3) * (x - 0.9) * (x - 1.7))
    assert bracket_root(f, 0.0, 2.0) == pytest.approx(0.3)
    assert f.calls < 201
    # An isolated exact zero on a scan point (0.5 = point 50) comes before a later sign change.
    assert bracket_root(lambda x: 0.0 if x == 0.5 else (x - 1.5), 0.0, 2.0) == 0.5


def test_a_function_zero_everywhere_still_scans_to_the_end_and_refuses():
    from concur.errors import UsageError

    f = _Counted(lambda x: 0.0)
    with pytest.raises(UsageError, match="every value"):
        bracket_root(f, 0.0, 2.0, what="x")
    assert f.calls == 201


def test_a_smooth_root_closes_in_a_handful_of_evaluations():
    # Brent's method after the scan: the root at 1e-6 (scan point 25) costs a few evaluations more,
    # where bisection to the last digits took ~50.
    f = _Counted(lambda x: math.log(x / 1e-6))
    assert bracket_root(f, 1e-9, 1e15) == pytest.approx(1e-6, rel=1e-14)
    assert f.calls <= 26 + 12
    g = _Counted(lambda x: math.exp(x) - 1e6)  # steep: false position alone stalls on one end
    assert bracket_root(g, 10.0, 20.0) == pytest.approx(math.log(1e6), rel=1e-14)
    assert g.calls <= 78 + 12  # the change lies between scan points 76 and 77 (step 0.05), then Brent


def test_a_jump_across_zero_still_closes_at_bisections_pace():
    # ceil(x) - 150.5 changes sign at the jump 150 -> 151, not at a root: the bracket closes on it
    f = _Counted(lambda x: math.ceil(x) - 150.5)
    root = bracket_root(f, 140.0, 185.0)
    assert root == pytest.approx(150.0, rel=1e-13)
    assert f.calls <= 201


def test_a_residual_that_grows_where_the_bracket_closes_is_a_pole_not_a_root():
    # (x - 1.5) / (x - 0.995) changes sign at the pole 0.995 first: |f| grows there, so that sign
    # change is given up and the true root at 1.5 is found
    assert bracket_root(lambda x: (x - 1.5) / (x - 0.9951), 0.0, 2.0) == pytest.approx(1.5)
    assert bracket_root(lambda x: 1 / (x - 0.9951), 0.0, 2.0) is None


def test_one_signed_needs_every_point_defined_and_of_one_sign():
    from concur.solver.roots import one_signed

    assert one_signed([-1.0, -2.0, -0.5]) and one_signed([3.0, 1.0])
    assert not one_signed([-1.0, None, -2.0])  # undefined somewhere: another tear may see a root
    assert not one_signed([-1.0, 0.0]) and not one_signed([-1.0, 2.0]) and not one_signed([])
