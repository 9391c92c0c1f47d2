"""ShardedCounter and LockedCounter: exact totals, monotonic reads, reset accounting, thread churn."""

from __future__ import annotations

import itertools
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from concur.primitives import LockedCounter, ShardedCounter

COUNTERS = [ShardedCounter, LockedCounter]
THREADS = 6
PER_THREAD = 20_000


def _hammer(counter, threads: int, per_thread: int, n: int = 1) -> None:
    barrier = threading.Barrier(threads)

    def body() -> None:
        barrier.wait()
        add = counter.add
        for _ in range(per_thread):
            add(n)

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


@pytest.mark.parametrize("cls", COUNTERS)
def test_single_thread_add_value_reset(cls) -> None:
    c = cls()
    assert c.value() == 0
    c.add()
    c.add(41)
    c.add(-2)
    assert c.value() == 40
    assert c.reset() == 40
    assert c.value() == 0
    c.add(5)
    assert c.value() == 5
    assert "value=5" in repr(c)


@pytest.mark.parametrize("cls", COUNTERS)
def test_no_lost_increments_under_fast_switching(cls, fast_switching) -> None:
    c = cls()
    _hammer(c, THREADS, PER_THREAD)
    assert c.value() == THREADS * PER_THREAD


def test_reads_during_adds_are_monotonic_and_bounded(fast_switching) -> None:
    """C1: with positive adds, one reader's successive reads never decrease and never exceed the total."""
    c = ShardedCounter()
    reads: list[int] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            reads.append(c.value())

    r = threading.Thread(target=reader)
    r.start()
    _hammer(c, 4, 10_000, n=3)
    done.set()
    r.join()
    total = 4 * 10_000 * 3
    assert c.value() == total
    assert len(reads) > 1
    assert all(a <= b for a, b in itertools.pairwise(reads))
    assert all(0 <= x <= total and x % 3 == 0 for x in reads)


@pytest.mark.parametrize("cls", COUNTERS)
def test_reset_during_adds_loses_and_duplicates_nothing(cls, fast_switching) -> None:
    """Every add lands exactly once: in some reset's return value or in the final value."""
    c = cls()
    removed: list[int] = []
    done = threading.Event()

    def resetter() -> None:
        while not done.is_set():
            removed.append(c.reset())

    r = threading.Thread(target=resetter)
    r.start()
    _hammer(c, 4, 10_000)
    done.set()
    r.join()
    assert sum(removed) + c.value() == 4 * 10_000
    assert all(x >= 0 for x in removed)


def test_exited_threads_are_folded_and_not_kept() -> None:
    c = ShardedCounter()
    for _ in range(40):
        t = threading.Thread(target=c.add, args=(2,))
        t.start()
        t.join()
    c.add()  # registers the main thread, folding every exited thread's cell
    assert c.value() == 81
    assert len(c._cells) == 1  # only the live main thread keeps a cell


def test_counters_are_independent() -> None:
    a, b = ShardedCounter(), ShardedCounter()
    a.add(3)
    b.add(4)
    assert (a.value(), b.value()) == (3, 4)


@given(st.lists(st.one_of(st.integers(-1000, 1000), st.none()), max_size=60))
def test_matches_a_plain_int_model(ops) -> None:
    """Any single-threaded sequence of adds (ints) and resets (None) agrees with a plain int."""
    c, model = ShardedCounter(), 0
    for op in ops:
        if op is None:
            assert c.reset() == model
            model = 0
        else:
            c.add(op)
            model += op
        assert c.value() == model
