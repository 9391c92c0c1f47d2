"""What counts as a root: one admissibility rule, on floats and on numpy arrays alike.

The scalar solver, the vectorised sweep and the Excel exporter all choose among closed-form roots
(``x**2 = a`` has two) and accept or refuse numeric roots. They must choose the same way, or a
sweep point would disagree with ``concur solve`` at the same givens. The rule:

1. a candidate is finite and satisfies its equation: ``|lhs - rhs| <= RESIDUAL_REL * scale``,
   where ``scale`` is the largest magnitude among the two sides and the candidate;
2. it lies within the variable's bounds, with a slack of :data:`BOUNDS_SLACK` relative to the
   bound, the value and the *scale* of the computation that gave it (the largest term of a sum:
   ``1 - p`` may give ``-1e-17`` for ``p = 1``), never an absolute slack: a mean wait of
   ``-2e-10 s`` from a saturated queue is outside ``[0, inf)``, not "about zero";
3. among admissible candidates the smallest in magnitude wins (the physical branch of a
   quadratic is the small one in every shipped pack); ties keep the first.

A numeric root from bracketing is accepted only where the residual *changes sign*, or is exactly
zero at an isolated point (its neighbours on the scan are both non-zero). This is what refuses
``c = c + a``: the residual ``-a`` vanishes only where ``c`` is so large that ``a`` is absorbed in
rounding (``c > 1e16`` for ``a = 1``), and there it is zero on a whole run of scan points -- an
artefact, not a root.

Named tolerances (not scattered literals): :data:`RESIDUAL_REL`, :data:`BOUNDS_SLACK`,
:data:`INTEGER_SNAP`, :data:`GOAL_REL`, :data:`CHECK_REL`, :data:`STEP_REL` (when a bisection
stops), :data:`PIVOT_REL` (a pivot that is rounding, not a number), :data:`NUDGE_REL` (a probe
beside a value), :data:`TINY` (the floor of a scale, so a relative test at zero is exact); and
the ranges searched for a variable without bounds (:data:`SEARCH_RANGE`, :data:`TEAR_RANGE`,
:data:`GOAL_SEEK_HIGH`, :data:`PROBES`). This module is the solver's and the sweep's numeric
policy: every tolerance either applies is one of these, through the functions here
(:func:`in_bounds` and :func:`in_bounds_array`, :func:`snap_integer` and
:func:`snap_integer_array`, :func:`is_whole`, :func:`close`, :func:`satisfies`, :func:`within`).
``tests/test_numeric_policy.py`` refuses a tolerance literal anywhere else in ``solver/`` and
``sweep/``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UsageError
from .budget import spend

__all__ = [
    "BOUNDS_SLACK",
    "CHECK_REL",
    "EDGE_REL",
    "EXAMPLE_ABS",
    "GOAL_REL",
    "GOAL_SEEK_HIGH",
    "INTEGER_SNAP",
    "NUDGE_REL",
    "PIVOT_REL",
    "PROBES",
    "RESIDUAL_REL",
    "SAME_REL",
    "SEARCH_RANGE",
    "STEP_REL",
    "TEAR_RANGE",
    "TINY",
    "bracket_root",
    "choose_root",
    "choose_root_array",
    "close",
    "in_bounds",
    "in_bounds_array",
    "is_whole",
    "one_signed",
    "satisfies",
    "snap_integer",
    "snap_integer_array",
    "within",
]

RESIDUAL_REL = 1e-6
"""A candidate satisfies ``lhs = rhs`` when the residual is within this fraction of the scale."""
BOUNDS_SLACK = 1e-9
"""Relative slack when testing bounds (rounding in closed forms must not push 0 to -1e-17)."""
INTEGER_SNAP = 1e-9
"""A value this close (relative) to a whole number is that whole number."""
GOAL_REL = 1e-9
"""A goal seek's target is met within this fraction of the target (or of the value it compares)."""
CHECK_REL = 1e-6
"""An answer substituted back into an equation satisfies it within this fraction of the larger
side (the same rule as :data:`RESIDUAL_REL`, applied to every equation after the solve)."""
SAME_REL = 1e-9
"""Two values read from different places (a catalog row and a given) are the same value."""
STEP_REL = 1e-13
"""A goal seek's bisection stops when its interval is this fraction of its midpoint."""
EDGE_REL = 1e-15
"""A root's bracket is closed to this fraction of it (a few units in the last place of a float)."""
PIVOT_REL = 1e-13
"""A pivot this small against its row's scale is rounding: the linear loop is singular there."""
NUDGE_REL = 1e-6
"""A probe this fraction beside a value (which side of it a goal is met on)."""
TINY = 1e-300
"""The floor of every scale a relative test divides by: at zero the test is exact, never an
absolute slack (1e-300 admits nothing a float of a physical quantity can hold)."""
EXAMPLE_ABS = 1e-12
"""An example whose expected value is 0 matches a computed value this small (a relative test has
nothing to be relative to there)."""
SEARCH_RANGE = (1e-12, 1e18)
"""Where a root of one equation is bracketed for a variable without a bound (or a bound at or below 0)."""
TEAR_RANGE = (1e-9, 1e15)
"""Where a torn loop's variable is bracketed without a bound (or a bound at or below 0)."""
GOAL_SEEK_HIGH = 1e6
"""The top end a goal seek reports reaching when its variable has no upper bound."""
PROBES = (1e-6, 1e-3, 0.5, 1.0, 7.0, 1e3, 1e6)
"""Values across a variable's range at which an equation that holds everywhere is recognised."""

Bounds = tuple[float | None, float | None]


def in_bounds(bounds: Bounds, value: float, slack: float = BOUNDS_SLACK, scale: float = 0.0) -> bool:
    """Whether ``value`` lies in ``bounds`` (None = open end), with ``slack`` relative to each bound,
    the value and ``scale`` (the magnitude of what the value was computed from; 0 when unknown).

    >>> in_bounds((0.0, None), -2e-10), in_bounds((0.0, None), -1e-17, scale=1.0)
    (False, True)
    """
    lo, hi = bounds
    if lo is not None and value < lo - slack * max(abs(lo), abs(value), scale):
        return False
    return hi is None or value <= hi + slack * max(abs(hi), abs(value), scale)


def in_bounds_array(bounds: Bounds, value: Any) -> Any:
    """:func:`in_bounds` per point of a numpy array (no computed scale: the bound and the value):
    a boolean array, True where the point is inside. NaN is outside."""
    import numpy as np

    lo, hi = bounds
    inside = np.ones(np.shape(value), dtype=bool)
    with np.errstate(invalid="ignore"):
        if lo is not None:
            inside &= value >= lo - BOUNDS_SLACK * np.maximum(np.abs(value), abs(lo))
        if hi is not None:
            inside &= value <= hi + BOUNDS_SLACK * np.maximum(np.abs(value), abs(hi))
    return inside


def within(value: float, target: float, sense: str) -> bool:
    """``value`` meets ``target`` in ``sense`` (at_least, at_most, equal) within :data:`GOAL_REL`
    (equal: :data:`CHECK_REL`) of the larger magnitude: the one comparison goal seeks and checks use."""
    tol = max(abs(target), abs(value), TINY)
    if sense == "at_least":
        return value >= target - GOAL_REL * tol
    if sense == "at_most":
        return value <= target + GOAL_REL * tol
    return abs(value - target) <= CHECK_REL * tol


def snap_integer(value: float) -> float:
    """``value`` rounded when it is within :data:`INTEGER_SNAP` (relative) of a whole number.

    >>> snap_integer(2.9999999999), snap_integer(2.5)
    (3.0, 2.5)
    """
    r = round(value)
    return float(r) if abs(value - r) <= INTEGER_SNAP * max(1.0, abs(value)) else value


def is_whole(value: float) -> bool:
    """Whether :func:`snap_integer` makes ``value`` a whole number."""
    return float(snap_integer(value)).is_integer()


def snap_integer_array(value: Any) -> Any:
    """:func:`snap_integer` per point of a numpy array."""
    import numpy as np

    r = np.round(value)
    return np.where(np.abs(value - r) <= INTEGER_SNAP * np.maximum(1.0, np.abs(value)), r, value)


def close(a: float, b: float, rel: float = CHECK_REL) -> bool:
    """``a`` and ``b`` agree within ``rel`` of the larger magnitude (exactly, at zero)."""
    return abs(a - b) <= rel * max(abs(a), abs(b), TINY)


def satisfies(lhs: float, rhs: float, x: float) -> bool:
    """Rule 1: finite, and the residual is small against the sides and the candidate."""
    if not (math.isfinite(lhs) and math.isfinite(rhs) and math.isfinite(x)):
        return False
    scale = max(abs(lhs), abs(rhs), abs(x), TINY)
    return abs(lhs - rhs) <= RESIDUAL_REL * scale


def choose_root(
    candidates: Sequence[tuple[float, float, float]], bounds: Bounds, scales: Sequence[float] = ()
) -> tuple[int, int]:
    """Rules 1-3 on ``(x, lhs(x), rhs(x))`` candidates: ``(index chosen, how many admissible)``.
    ``scales``: per candidate, the magnitude of what its closed form adds (rule 2's scale; 0 if absent).

    The index is -1 when none is admissible; then the caller reports the first valid candidate's
    bounds violation (``first_valid``) or that no candidate satisfies the equation.
    """
    best, best_mag, count = -1, math.inf, 0
    for i, (x, lhs, rhs) in enumerate(candidates):
        scale = scales[i] if i < len(scales) else 0.0
        if not satisfies(lhs, rhs, x) or not in_bounds(bounds, x, scale=scale):
            continue
        count += 1
        if abs(x) < best_mag:
            best, best_mag = i, abs(x)
    return best, count


def choose_root_array(xs: Sequence[Any], lhss: Sequence[Any], rhss: Sequence[Any], bounds: Bounds) -> tuple[Any, Any]:
    """The same rules per point of numpy arrays: ``(chosen values, index chosen)``.

    Where no candidate is admissible the value is the first candidate that satisfies the equation
    (so the caller's bounds check flags it), else NaN; the index is -1 there.
    """
    import numpy as np

    shape = np.broadcast_shapes(*[np.shape(x) for x in xs], *[np.shape(v) for v in lhss], *[np.shape(v) for v in rhss])
    X = np.stack([np.broadcast_to(np.asarray(x, dtype=float), shape) for x in xs])
    L = np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in lhss])
    R = np.stack([np.broadcast_to(np.asarray(v, dtype=float), shape) for v in rhss])
    with np.errstate(all="ignore"):
        finite = np.isfinite(X) & np.isfinite(L) & np.isfinite(R)
        scale = np.maximum(np.maximum(np.abs(L), np.abs(R)), np.maximum(np.abs(X), TINY))
        valid = finite & (np.abs(L - R) <= RESIDUAL_REL * scale)
        inside = valid & in_bounds_array(bounds, X)
        magnitude = np.where(inside, np.abs(X), np.inf)
        index = np.argmin(magnitude, axis=0)
        chosen = np.take_along_axis(X, index[None], axis=0)[0]
        first_valid = np.take_along_axis(X, np.argmax(valid, axis=0)[None], axis=0)[0]
        any_within = inside.any(axis=0)
        values = np.where(any_within, chosen, np.where(valid.any(axis=0), first_valid, np.nan))
    return values, np.where(any_within, index, -1)


def bracket_root(
    f: Callable[[float], float],
    lo: float,
    hi: float,
    *,
    what: str = "a root",
    hint: str = "",
    scanned: list[float | None] | None = None,
) -> float | None:
    """A root of ``f`` in [lo, hi]: scan up to 201 points (log-spaced when wide), close the first sign change.

    Only a sign change or an isolated exact zero counts (see the module essay); an ``f`` that is 0
    wherever it is defined is a question that does not determine the unknown (UsageError). A sign
    change between the last defined scan point and where ``f`` stops being defined is found by
    walking to that edge (M/M/1's queue length near load 1). Evaluations that
    raise ``ArithmeticError``/``ValueError`` are skipped; closing a bracket that meets one (or a
    non-finite value) gives up that sign change (a pole, or a failed inner solve: no root it can
    vouch for) and goes on to the next. Each evaluation spends budget
    (:func:`concur.solver.budget.spend`, raising :class:`~concur.errors.BudgetError` past it).

    ``scanned``, when given, receives the scan's values (None where ``f`` is undefined): a caller
    told None can see whether ``f`` was defined everywhere and of one sign (:func:`one_signed`).
    """
    points: list[float]  # float ** float is typed Any (a negative base gives a complex)
    if lo > 0 and hi / lo > 100:
        points = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    else:
        points = [lo + (hi - lo) * i / 200 for i in range(201)]
    # The scan is lazy: it stops at the first event (an isolated zero or a sign change whose
    # closing vouches for a root), which is the event a full scan would have chosen first --
    # an isolated zero is decided once its right neighbour is known, and a sign change needs a
    # non-zero left neighbour, so no later point can pre-empt an earlier event.
    values: list[float | None] = [] if scanned is None else scanned
    del values[:]
    for x in points:
        spend(what, hint)
        try:
            fx = f(x)
        except (ArithmeticError, ValueError):
            fx = None
        values.append(fx if fx is None or math.isfinite(fx) else None)
        root = _event_before(f, points, values, what, hint)
        if root is not None:
            return root
    if _isolated_zero(values, len(values) - 1):
        return points[-1]
    valid = [v for v in values if v is not None]
    if len(valid) > 2 and all(v == 0 for v in valid):
        raise UsageError(
            f"every value of {what} in its range satisfies the equations: the givens do not determine it",
            hint=hint or "give it directly, or another value that constrains it",
        )
    return _root_at_an_edge(f, points, values, what, hint)


def one_signed(values: Sequence[float | None]) -> bool:
    """Whether a scan found ``f`` defined at every point and of one sign, never 0: no root lies
    between its points that a sign change could show, and no edge of a defined region hides one."""
    return bool(values) and (
        all(v is not None and v > 0 for v in values) or all(v is not None and v < 0 for v in values)
    )


def _isolated_zero(values: list[float | None], i: int) -> bool:
    """``values[i]`` is 0 and a neighbour on the scan is defined and non-zero (the neighbour past
    the end of the list counts as undefined)."""
    if values[i] != 0:  # None too
        return False
    before = values[i - 1] if i > 0 else None
    after = values[i + 1] if i + 1 < len(values) else None
    return (before is None or before != 0) and (after is None or after != 0) and bool(before or after)


def _event_before(
    f: Callable[[float], float], points: list[float], values: list[float | None], what: str, hint: str
) -> float | None:
    """With ``values`` scanned up to its last point ``j``: the root that point decides, if any --
    an isolated zero at ``j - 1`` (now that its right neighbour is known) or a sign change between
    ``j - 1`` and ``j`` whose closing meets no pole."""
    j = len(values) - 1
    if j == 0:
        return None
    if _isolated_zero(values, j - 1):
        return points[j - 1]
    prev, fx = values[j - 1], values[j]
    if prev is None or fx is None or prev == 0 or fx == 0 or (fx > 0) == (prev > 0):
        return None
    return _close_sign_change(f, points[j - 1], points[j], prev, fx, what, hint)


def _root_at_an_edge(
    f: Callable[[float], float], points: list[float], values: list[float | None], what: str, hint: str
) -> float | None:
    """A sign change hidden between the last valid scan point and where ``f`` stops being defined
    (M/M/1's queue length grows without bound as the load nears 1, and fails past it): walk to the
    edge of the valid region by bisection; if ``f`` changes sign on the way, bisect that change."""
    for i in range(len(points) - 1):
        (x0, f0), (x1, f1) = (points[i], values[i]), (points[i + 1], values[i + 1])
        if (f0 is None) == (f1 is None) or (f0 == 0 if f0 is not None else f1 == 0):
            continue
        good, bad, fg = (x0, x1, f0) if f0 is not None else (x1, x0, f1)
        assert fg is not None
        for _ in range(80):  # toward the edge, keeping the last point where f is defined
            spend(what, hint)
            mid = 0.5 * (good + bad)
            try:
                fm = f(mid)
            except (ArithmeticError, ValueError):
                fm = None
            if fm is None or not math.isfinite(fm):
                bad = mid
                continue
            if (fm > 0) != (fg > 0) or fm == 0:
                return _close_sign_change(f, good, mid, fg, fm, what, hint)
            good = mid
            if abs(bad - good) <= EDGE_REL * max(abs(good), TINY):
                break
    return None


def _close_sign_change(
    f: Callable[[float], float], a: float, b: float, fa: float, fb: float, what: str, hint: str
) -> float | None:
    """The root of ``f`` in ``[a, b]``, where ``fa`` and ``fb`` differ in sign, to within
    :data:`EDGE_REL` of its magnitude: Brent's method (R. P. Brent, *Algorithms for Minimization
    without Derivatives*, 1973, ch. 4), which keeps a bracket and takes an interpolation step only
    where it shrinks the bracket faster than bisection would. A smooth residual converges in a
    handful of evaluations rather than plain bisection's ~50; a kink or a jump (``ceil``, ``if_``)
    still converges at bisection's pace. None when an evaluation fails or is not finite, or when
    ``|f|`` where the bracket closes exceeds both ends' (a pole between the scan points, or a
    failed inner solve: no root to vouch for).
    """
    c, fc = a, fa
    d = e = b - a
    largest = max(abs(fa), abs(fb))  # a pole, not a root, where |f| ends above both ends'
    for _ in range(200):
        if (fb > 0) == (fc > 0):  # keep c on the other side of the root from b
            c, fc = a, fa
            d = e = b - a
        if abs(fc) < abs(fb):  # b is the best estimate so far
            a, b, c, fa, fb, fc = b, c, b, fb, fc, fb
        tol = 0.5 * EDGE_REL * max(abs(b), TINY)
        m = 0.5 * (c - b)
        if abs(m) <= tol or fb == 0:
            return b if abs(fb) <= largest else None
        d, e = _brent_step(a, b, c, fa, fb, fc, d, e, m, tol)
        a, fa = b, fb
        b += d if abs(d) > tol else (tol if m > 0 else -tol)
        spend(what, hint)
        try:
            fb = f(b)
        except (ArithmeticError, ValueError):
            return None
        if not math.isfinite(fb):
            return None
    return b if abs(fb) <= largest else None


def _brent_step(
    a: float, b: float, c: float, fa: float, fb: float, fc: float, d: float, e: float, m: float, tol: float
) -> tuple[float, float]:
    """Brent's next step ``(d, e)`` from ``b``: inverse quadratic interpolation through a, b, c
    (the secant when a is c), accepted only when it lands well inside the bracket and shrinks
    faster than the step before last; otherwise bisection (``m``, half the bracket)."""
    if abs(e) < tol or abs(fa) <= abs(fb):
        return m, m
    s = fb / fa
    if a == c:
        p, q = 2.0 * m * s, 1.0 - s
    else:
        q, r = fa / fc, fb / fc
        p = s * (2.0 * m * q * (q - r) - (b - a) * (r - 1.0))
        q = (q - 1.0) * (r - 1.0) * (s - 1.0)
    if p > 0:
        q = -q
    else:
        p = -p
    if 2.0 * p < min(3.0 * m * q - abs(tol * q), abs(e * q)):
        return p / q, d
    return m, m
