"""The plan side of live searched integers: how a candidate table picks, and when it refuses.

No LibreOffice here: :func:`pick` is the Python twin of the sheet's MATCH/INDEX formulas, and
:func:`make_live` must leave a row implicit whenever its table would not reproduce the solver.
"""

from __future__ import annotations

import sympy as sp
from concur.excel.live_search import MAX_CANDIDATES, Candidate, make_live, pick
from concur.excel.plan import Derived, SheetVar

S = sp.Symbol


def test_smallest_is_the_first_pass_skipping_skips() -> None:
    assert pick([None, False, False, True, True], "smallest", low_is_floor=True) == (3, "ok")
    assert pick([None, None, False], "smallest", low_is_floor=True) == (None, "out of range")
    # a table that starts above the variable's bound cannot vouch for a pass in its first row
    assert pick([True, True], "smallest", low_is_floor=False) == (None, "out of range")
    assert pick([True, True], "smallest", low_is_floor=True) == (0, "ok")


def test_largest_is_the_last_pass_before_the_first_failure() -> None:
    assert pick([True, None, True, False, True], "largest", low_is_floor=True) == (2, "ok")
    assert pick([True, True, True], "largest", low_is_floor=True) == (None, "out of range")
    assert pick([False, True], "largest", low_is_floor=True) == (None, "none passes")
    assert pick([None, False], "largest", low_is_floor=False) == (None, "out of range")


def _plan(answer: float) -> tuple[list[Derived], Candidate]:
    """n (searched) -> y = 3*n -> a test y >= target (12): the smallest n is 4."""
    n = SheetVar("n", "", 1, "searched", integer=True, bounds=(1, None))
    y = SheetVar("y", "", 1, "grows with n", bounds=(0, None))
    rows = [Derived(n, None, "search", "search", answer, implicit=True, residual=S("y") - S("target")),
            Derived(y, 3 * S("n"), "y = 3 n", "t:1", 3 * answer)]
    cand = Candidate("n", sp.Ge(S("y"), S("target")), "smallest", skip=True, floor=1, ceiling=None,
                     about="the smallest n giving y at least target", extra=(("target", 12.0),))
    return rows, cand


def test_a_table_that_reproduces_the_solver_becomes_live() -> None:
    rows, cand = _plan(4.0)
    out, notes = make_live(rows, [cand], {"n": 4.0, "y": 12.0}, {"y": (0.0, None)})
    assert notes == []
    found = out[0].search
    assert found is not None and not out[0].implicit and out[0].residual is None
    assert (found.low, found.high, found.columns) == (1, 16, ("y",))


def test_a_table_that_disagrees_with_the_solver_stays_implicit() -> None:
    rows, cand = _plan(5.0)  # the solver said 5; the table picks 4
    out, notes = make_live(rows, [cand], {"n": 5.0, "y": 15.0}, {"y": (0.0, None)})
    assert out[0].implicit and out[0].search is None
    assert notes == ["n stays implicit (Goal Seek its residual after editing inputs): a table of 1..20 picks 4, not 5"]


def test_a_goal_behind_an_implicit_row_stays_implicit() -> None:
    rows, cand = _plan(4.0)
    z = SheetVar("z", "", 1, "found numerically")
    rows.append(Derived(z, None, "z = f(y)", "t:2", 1.0, implicit=True, residual=S("z") - S("y")))
    cand = Candidate("n", sp.Ge(S("z"), S("target")), "smallest", True, 1, None, "z", extra=(("target", 12.0),))
    out, notes = make_live(rows, [cand], {"n": 4.0, "y": 12.0, "z": 12.0}, {})
    assert out[0].implicit and "no closed form" in notes[0]


def test_large_answers_get_a_window_around_them() -> None:
    n = SheetVar("n", "", 1, "searched", integer=True, bounds=(1, None))
    y = SheetVar("y", "", 1, "y")
    rows = [Derived(n, None, "search", "search", 5000.0, implicit=True),
            Derived(y, S("n"), "y = n", "t:1", 5000.0)]
    cand = Candidate("n", sp.Ge(S("y"), S("target")), "smallest", True, 1, None, "n", extra=(("target", 5000.0),))
    out, notes = make_live(rows, [cand], {"n": 5000.0, "y": 5000.0}, {})
    found = out[0].search
    assert notes == [] and found is not None
    assert found.high - found.low + 1 == MAX_CANDIDATES and found.low < 5000 < found.high
