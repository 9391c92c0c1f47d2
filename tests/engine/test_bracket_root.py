"""bracket_root: evaluations that fail are skipped during the bisection too, not only on the scan.

Found by tests/engine/test_fuzz_every_pack.py: a torn loop's residual raised ZeroDivisionError at
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
