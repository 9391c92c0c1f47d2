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
    rows = [
        Derived(n, None, "search", "search", answer, implicit=True, residual=S("y") - S("target")),
        Derived(y, 3 * S("n"), "y = 3 n", "t:1", 3 * answer),
    ]
    cand = Candidate(
        "n",
        sp.Ge(S("y"), S("target")),
        "smallest",
        skip=True,
        floor=1,
        ceiling=None,
        about="the smallest n giving y at least target",
        extra=(("target", 12.0),),
    )
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


def test_a_goal_behind_a_row_without_a_usable_residual_stays_implicit() -> None:
    rows, cand = _plan(4.0)
    z = SheetVar("z", "", 1, "found numerically")  # z**2 = y: the slope 2 z is no number, no fixed-point map
    rows.append(Derived(z, None, "z = f(y)", "t:2", 1.0, implicit=True, residual=S("z") ** 2 - S("y")))
    cand = Candidate("n", sp.Ge(S("z"), S("target")), "smallest", True, 1, None, "z", extra=(("target", 12.0),))
    out, notes = make_live(rows, [cand], {"n": 4.0, "y": 12.0, "z": 12.0**0.5}, {})
    assert out[0].implicit and "no closed form" in notes[0]


def _loop(solved: float) -> tuple[list[Derived], Candidate, dict[str, float]]:
    """The fleet's shape in miniature: n replicas, a batch c per replica (a loop torn at c: the
    step t = 1 + 0.1 c, the residence w = 2 t, the batch b = 10 w / n), and the requirement
    ceil(10 w / 10) <= n. So c = 20 / (n - 2): no fixed point up to n = 2, 20 at n = 3 (60 in
    flight: 6 replicas' worth, too few), 10 at n = 4 (40 in flight: enough)."""
    var = {name: SheetVar(name, "", 1, name, bounds=(0, None)) for name in ("c", "t", "w", "b")}
    n = SheetVar("n", "", 1, "replicas", integer=True, bounds=(1, None))
    c, t, w, b, k = S("c"), S("t"), S("w"), S("b"), S("n")
    rows = [
        Derived(n, None, "n = ceil(...)", "t:1", 4.0, implicit=True, residual=k - sp.ceiling(10 * w / 10)),
        Derived(var["c"], None, "c = b", "t:2", solved, implicit=True, residual=c - b),
        Derived(var["t"], 1 + c / 10, "t = 1 + 0.1 c", "t:3", 2.0),
        Derived(var["w"], 2 * t, "w = 2 t", "t:4", 4.0),
        Derived(var["b"], 10 * w / k, "b = 10 w / n", "t:5", 10.0),
    ]
    cand = Candidate(
        "n",
        sp.Le(sp.ceiling(10 * w / 10), k),
        "smallest",
        skip=False,
        floor=1,
        ceiling=None,
        about="the smallest n with ceil(10 w / 10) <= n",
    )
    return rows, cand, {"n": 4.0, "c": solved, "t": 2.0, "w": 4.0, "b": 10.0}


def test_a_loop_inside_each_row_is_solved_there() -> None:
    rows, cand, values = _loop(10.0)
    out, notes = make_live(rows, [cand], values, {name: (0.0, None) for name in "ctwb"})
    assert notes == []
    found = out[0].search
    assert found is not None and found.columns == ("c", "t", "w", "b")
    (root,) = found.roots
    assert (root.variable, root.body, root.slope, root.start) == ("c", ("t", "w", "b"), 1.0, 0.0)
    assert out[1].solved_in == "n" and not out[1].implicit and out[1].residual is None


def test_a_loop_whose_row_disagrees_with_the_solver_stays_implicit() -> None:
    rows, cand, values = _loop(11.0)  # the solver's c at n = 4 (10) misreported
    out, notes = make_live(rows, [cand], values, {name: (0.0, None) for name in "ctwb"})
    assert out[0].search is None and out[1].implicit
    assert notes == [
        "n stays implicit (Goal Seek its residual after editing inputs): its row of the answer "
        "solves c = 10, not the solver's 11"
    ]


def test_the_iterations_find_the_smaller_fixed_point_or_none() -> None:
    from concur.excel.live_search import FIXED_STEPS, SECANT_STEPS, TOLERANCE, iterate_root
    from concur.excel.plan import Root

    root = Root("x", S("x"), 1.0, (), 0.0, FIXED_STEPS, SECANT_STEPS, TOLERANCE)
    # g(x) = 0.5 + x^2/3 has fixed points (3 -+ sqrt 3)/2 = 0.634 and 2.366: the smaller is stable
    got = iterate_root(root, lambda x: x - (0.5 + x * x / 3))
    assert got is not None and abs(got - (3 - 3**0.5) / 2) <= 1e-12
    assert iterate_root(root, lambda x: x - (1 + x * x)) is None  # g above the diagonal everywhere: none
    assert iterate_root(root, lambda x: x - 2.5) == 2.5  # a constant g: one step


def test_large_answers_get_a_window_around_them() -> None:
    n = SheetVar("n", "", 1, "searched", integer=True, bounds=(1, None))
    y = SheetVar("y", "", 1, "y")
    rows = [Derived(n, None, "search", "search", 5000.0, implicit=True), Derived(y, S("n"), "y = n", "t:1", 5000.0)]
    cand = Candidate("n", sp.Ge(S("y"), S("target")), "smallest", True, 1, None, "n", extra=(("target", 5000.0),))
    out, notes = make_live(rows, [cand], {"n": 5000.0, "y": 5000.0}, {})
    found = out[0].search
    assert notes == [] and found is not None
    assert found.high - found.low + 1 == MAX_CANDIDATES and found.low < 5000 < found.high
