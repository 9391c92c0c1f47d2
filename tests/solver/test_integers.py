"""frontier.smallest/largest against brute force, including invalid (None) values and wide ranges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from concur.solver import integers as frontier


@given(
    lo=st.integers(-50, 50),
    width=st.integers(0, 300),
    cut=st.integers(-60, 400),
    holes=st.sets(st.integers(-60, 400), max_size=20),
)
def test_smallest_matches_brute_force(lo, width, cut, holes):
    hi = lo + width

    def ok(n):
        return None if n in holes else n >= cut

    want = next((n for n in range(lo, hi + 1) if ok(n) is True), None)
    assert frontier.smallest(ok, lo, hi) == want


@given(
    lo=st.integers(-50, 50),
    width=st.integers(0, 300),
    cut=st.integers(-60, 400),
    holes=st.sets(st.integers(-60, 400), max_size=20),
)
def test_largest_matches_brute_force(lo, width, cut, holes):
    hi = lo + width
    holes.discard(lo)

    def ok(n):
        return None if n in holes else n <= cut

    if ok(lo) is not True:
        assert frontier.largest(ok, lo, hi) is None
        return
    best = lo
    for n in range(lo + 1, hi + 1):
        if ok(n) is True:
            best = n
        elif ok(n) is False:
            break
    assert frontier.largest(ok, lo, hi) == best


@given(cut=st.integers(1, 10**12))
def test_wide_ranges_bisect(cut):
    assert frontier.smallest(lambda n: n >= cut, 1, 1 << 40) == cut
    assert frontier.largest(lambda n: n <= cut, 1, 1 << 40) == cut
