"""Integer frontiers: the smallest (or largest) whole number meeting a monotone goal.

Both the goal seek (:mod:`concur.solver.goal_seek`: the smallest TP for 100 users, the largest fleet a
budget pays for) and loop tearing in the solver (the smallest replica count whose requirement
fits) ask the same question of a predicate ``ok(n)`` that is monotone over ``[lo, hi]``:

* ``smallest``: ``ok`` is False then True -> the first True;
* ``largest``: ``ok`` is True then False -> the last True (``ok(lo)`` must hold).

``ok`` may also answer None for a value that is *invalid* rather than failing (a TP that does
not divide the attention heads): such values are skipped, never chosen. Within
:data:`SCAN_LIMIT` values the range is scanned one by one, so invalid values cannot mislead a
bisection; wider ranges are probed exponentially and bisected (invalid counts as failing there).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SCAN_LIMIT", "largest", "smallest"]

SCAN_LIMIT = 4096
Goal = Callable[[int], "bool | None"]


def smallest(ok: Goal, lo: int, hi: int) -> int | None:
    """The first n in [lo, hi] with ok(n) True, or None."""
    if hi < lo:
        return None
    if hi - lo <= SCAN_LIMIT:
        return next((n for n in range(lo, hi + 1) if ok(n) is True), None)
    prev, n = lo - 1, lo
    while ok(n) is not True:
        if n >= hi:
            return None
        prev, n = n, min(hi, max(n + 1, n * 2))
    while n - prev > 1:
        mid = (prev + n) // 2
        if ok(mid) is True:
            n = mid
        else:
            prev = mid
    return n


def largest(ok: Goal, lo: int, hi: int) -> int | None:
    """The last n in [lo, hi] with ok(n) True, walking up from lo (which must meet the goal), or None."""
    if hi < lo or ok(lo) is not True:
        return None
    if hi - lo <= SCAN_LIMIT:
        best = lo
        for n in range(lo + 1, hi + 1):
            verdict = ok(n)
            if verdict is True:
                best = n
            elif verdict is False:
                break
        return best
    good, n = lo, lo
    while ok(n) is True:
        good = n
        if n >= hi:
            return hi
        n = min(hi, max(n + 1, n * 2))
    while n - good > 1:
        mid = (good + n) // 2
        if ok(mid) is True:
            good = mid
        else:
            n = mid
    return good
