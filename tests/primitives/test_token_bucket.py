"""In-process and asyncio token bucket: decisions under a fake clock, properties, threads."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concur.primitives import (
    AsyncTokenBucket,
    Decision,
    TokenBucket,
    ratelimit_headers,
    retry_after_header,
)

ENGINE = Path(__file__).resolve().parents[2] / "engine"


# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "capacity, rate, match",
    [
        (0, 1, "capacity"),
        (0.5, 1, "capacity"),
        (math.nan, 1, "capacity"),
        (math.inf, 1, "capacity"),
        (10, 0, "rate"),
        (10, -1, "rate"),
        (10, math.nan, "rate"),
        ("ten", 1, "numbers"),
    ],
)
def test_bad_policy_is_rejected(capacity, rate, match):
    with pytest.raises(ValueError, match=match):
        TokenBucket(capacity, rate)


@pytest.mark.parametrize("n", [0, -1, math.nan, math.inf])
def test_bad_cost_is_rejected(clock, n):
    bucket = TokenBucket(10, 1, clock)
    with pytest.raises(ValueError, match="cost n must be"):
        bucket.try_acquire(n)


def test_cost_above_capacity_raises_instead_of_waiting_forever(clock):
    bucket = TokenBucket(10, 1, clock, sleep=clock.sleep)
    with pytest.raises(ValueError, match="exceeds capacity=10.*never be admitted"):
        bucket.try_acquire(11)
    with pytest.raises(ValueError, match="exceeds capacity"):
        bucket.acquire(11)
    assert clock.log == []


def test_initial_tokens_validated(clock):
    with pytest.raises(ValueError, match="initial tokens"):
        TokenBucket(10, 1, clock, initial=11)
    assert TokenBucket(10, 1, clock, initial=0).try_acquire() == Decision(False, 0.0, 1.0)


# --- decisions under a fake clock (the essay's worked example as a case table) --------

# (advance seconds, cost) -> (allowed, remaining, retry_after)
WORKED_EXAMPLE = [
    *[((0, 1), (True, 9 - i, 0.0)) for i in range(10)],
    ((0, 1), (False, 0.0, 0.5)),
    ((0.5, 1), (True, 0.0, 0.0)),
    ((2.5, 4), (True, 1.0, 0.0)),
    ((0, 3), (False, 1.0, 1.0)),
    ((100, 10), (True, 0.0, 0.0)),  # refill stops at capacity
]


def test_worked_example_case_table(clock):
    bucket = TokenBucket(capacity=10, rate=2, clock=clock)
    for (advance, cost), expected in WORKED_EXAMPLE:
        clock.advance(advance)
        got = bucket.try_acquire(cost)
        assert got.allowed == expected[0]
        assert got.remaining == pytest.approx(expected[1])
        assert got.retry_after == pytest.approx(expected[2])


def test_fractional_refill_is_not_lost(clock):
    bucket = TokenBucket(capacity=1, rate=0.3, clock=clock, initial=0)
    for _ in range(33):  # 33 calls 0.1 s apart: 3.3 s * 0.3/s = 0.99 token
        clock.advance(0.1)
        assert not bucket.try_acquire().allowed
    clock.advance(0.1)
    assert bucket.try_acquire().allowed


def test_clock_stepping_back_is_clamped(clock):
    bucket = TokenBucket(capacity=5, rate=1, clock=clock, initial=0)
    clock.advance(-100)  # a faulty clock jumps back
    assert bucket.try_acquire() == Decision(False, 0.0, 1.0)
    clock.advance(100.5)  # back to 0.5 s after the original stamp: no free tokens
    decision = bucket.try_acquire()
    assert not decision.allowed and decision.remaining == pytest.approx(0.5)


def test_peek_does_not_debit(clock):
    bucket = TokenBucket(capacity=2, rate=1, clock=clock)
    assert bucket.peek(2) == Decision(True, 0.0, 0.0)
    assert bucket.try_acquire(2).allowed
    assert bucket.peek() == Decision(False, 0.0, 1.0)


def test_infinite_rate_always_refills(clock):
    bucket = TokenBucket(capacity=3, rate=math.inf, clock=clock)
    for _ in range(10):
        clock.advance(1e-6)
        assert bucket.try_acquire(3).allowed


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"slept {seconds!r} s: acquire should not wait (it would spin on a frozen clock)")


def test_infinite_rate_with_a_frozen_clock_never_waits():
    """Regression: refill was (now - last) * rate, so with no time passing an infinite-rate
    bucket stayed empty, retry_after was 0, and acquire(timeout=1) spun forever."""
    frozen = lambda: 5.0
    bucket = TokenBucket(capacity=2, rate=math.inf, clock=frozen, initial=0, sleep=no_sleep)
    assert bucket.peek(2) == Decision(True, 0.0, 0.0)
    assert bucket.try_acquire(2) == Decision(True, 0.0, 0.0)
    assert all(bucket.acquire(2, timeout=1) for _ in range(5))
    assert bucket.acquire(1, timeout=None) and bucket.acquire(1, timeout=0)


def test_async_infinite_rate_with_a_frozen_clock_never_waits():
    async def scenario() -> list[bool]:
        bucket = AsyncTokenBucket(2, math.inf, lambda: 5.0, initial=0)
        got = [await bucket.acquire(2, timeout=1) for _ in range(5)]
        assert bucket.waiting == 0
        return got

    assert asyncio.run(scenario()) == [True] * 5


@pytest.mark.parametrize("make", [TokenBucket, AsyncTokenBucket])
@pytest.mark.parametrize("capacity, rate, match", [(math.nan, 1, "capacity"), (1, math.nan, "rate")])
def test_nan_policy_is_refused_by_both_buckets(make, capacity, rate, match):
    with pytest.raises(ValueError, match=match):
        make(capacity, rate, lambda: 0.0)


def test_async_nan_cost_and_timeout_are_refused(clock):
    async def scenario() -> None:
        bucket = AsyncTokenBucket(2, 1, clock)
        with pytest.raises(ValueError, match="cost n must be"):
            await bucket.acquire(math.nan)
        with pytest.raises(ValueError, match="cost n must be"):
            bucket.try_acquire(math.nan)
        with pytest.raises(ValueError, match="timeout"):
            await bucket.acquire(1, timeout=math.nan)

    asyncio.run(scenario())


# --- blocking acquire: Guava-style event log -----------------------------------------


def test_blocking_acquire_sleeps_exactly_retry_after(clock):
    bucket = TokenBucket(capacity=1, rate=5, clock=clock, initial=0, sleep=clock.sleep)
    assert bucket.acquire() and bucket.acquire() and bucket.acquire(timeout=0.2)
    assert clock.log == ["S0.20", "S0.20", "S0.20"]


def test_acquire_never_sleeps_past_deadline(clock):
    bucket = TokenBucket(capacity=4, rate=2, clock=clock, initial=0, sleep=clock.sleep)
    assert bucket.acquire(2, timeout=0.99) is False  # needs 1.0 s
    assert clock.log == []
    assert bucket.acquire(2, timeout=0) is False
    assert bucket.acquire(2, timeout=-5) is False
    assert bucket.acquire(2, timeout=1.0) is True
    assert clock.log == ["S1.00"]
    assert bucket.acquire(1, timeout=math.inf) is True
    with pytest.raises(ValueError, match="timeout"):
        bucket.acquire(1, timeout=math.nan)


def test_acquire_retries_when_a_competitor_took_the_token(clock):
    bucket = TokenBucket(capacity=1, rate=1, clock=clock, initial=0)

    def sleep_and_lose(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.log) == 1:
            assert bucket.try_acquire().allowed  # a competitor wins the first token

    bucket._sleep = sleep_and_lose
    assert bucket.acquire(timeout=5)
    assert clock.log == ["S1.00", "S1.00"]


# --- properties ----------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=5, allow_nan=False),  # advance
        st.floats(min_value=0.01, max_value=1.0),  # cost as a fraction of capacity
        st.booleans(),  # on denial, wait exactly retry_after and retry
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    capacity=st.floats(min_value=1, max_value=1000),
    rate=st.floats(min_value=1e-3, max_value=1e4),
    start=st.floats(min_value=0, max_value=1e6),
    ops=OPS,
)
def test_window_bound_nonnegative_tokens_and_exact_retry_after(capacity, rate, start, ops):
    clock = _Clock(start)
    bucket = TokenBucket(capacity, rate, clock)
    admitted: list[tuple[float, float]] = []  # (time, cost)
    for advance, fraction, retry in ops:
        clock.now += advance
        cost = fraction * capacity
        before = bucket.peek(cost)
        decision = bucket.try_acquire(cost)
        assert decision.remaining >= 0
        assert decision.remaining <= capacity
        assert decision.allowed == before.allowed
        if decision.allowed:
            assert decision.retry_after == 0.0
            admitted.append((clock.now, cost))
            continue
        expected = (cost - decision.remaining) / rate
        assert decision.retry_after == pytest.approx(expected, rel=1e-9, abs=1e-9)
        if retry:
            clock.now += decision.retry_after
            again = bucket.try_acquire(cost)
            assert again.allowed, "retrying after retry_after must succeed with no competitor"
            admitted.append((clock.now, cost))
    for i, (t0, _) in enumerate(admitted):
        total = 0.0
        for t1, cost in admitted[i:]:
            total += cost
            bound = capacity + rate * (t1 - t0)
            assert total <= bound * (1 + 1e-9) + 1e-9, (t0, t1, total, bound)


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- threads ---------------------------------------------------------------------------


def test_eight_threads_admit_exactly_capacity(fast_switching):
    capacity = 500
    bucket = TokenBucket(capacity=capacity, rate=1e-9)  # real clock; refill is negligible
    barrier = threading.Barrier(8)
    counts = [0] * 8

    def hammer(slot: int) -> None:
        barrier.wait()
        for _ in range(400):
            if bucket.try_acquire().allowed:
                counts[slot] += 1

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sum(counts) == capacity


# --- asyncio -------------------------------------------------------------------------


def test_async_bucket_with_fake_clock(clock, run_virtual):
    async def scenario() -> list[bool]:
        bucket = AsyncTokenBucket(2, 4, clock, initial=0)
        assert bucket.capacity == 2 and bucket.rate == 4
        assert bucket.try_acquire() == Decision(False, 0.0, 0.25)
        return [await bucket.acquire(2), await bucket.acquire(1, timeout=0.1)]

    start = clock.now
    assert run_virtual(scenario()) == [True, False]
    assert clock.now == start + 0.5  # one wait of 0.5 s; the refused call did not wait


def test_async_bucket_default_clock_is_monotonic_and_needs_no_loop():
    bucket = AsyncTokenBucket(1, 1)  # built outside any event loop
    assert bucket._bucket._clock is time.monotonic
    assert bucket.try_acquire().allowed  # also usable from plain threads

    async def scenario() -> bool:
        assert asyncio.get_running_loop().time.__func__ is asyncio.BaseEventLoop.time  # the default loop
        return await bucket.acquire(timeout=0)  # 1 s short of a token: refused at once, no sleep

    assert asyncio.run(scenario()) is False


# --- HTTP headers --------------------------------------------------------------------


@pytest.mark.parametrize(
    "decision, header",
    [
        (Decision(True, 3.0, 0.0), "0"),
        (Decision(False, 0.0, 0.001), "1"),
        (Decision(False, 0.0, 1.0), "1"),
        (Decision(False, 0.0, 1.0000001), "2"),
        (Decision(False, 0.5, 29.5), "30"),
    ],
)
def test_retry_after_header_rounds_up(decision, header):
    assert retry_after_header(decision) == header


def test_ratelimit_headers_for_a_denial():
    headers = ratelimit_headers(Decision(False, 0.4, 0.3), capacity=100, rate=100 / 60)
    assert headers == {
        "RateLimit-Policy": '"default";q=100;w=60',
        "RateLimit": '"default";r=0;t=60',
        "Retry-After": "1",
    }
    with pytest.raises(ValueError, match="policy name"):
        ratelimit_headers(Decision(True, 1, 0), 10, 1, policy='a"b')


# --- layering ------------------------------------------------------------------------


def test_import_primitives_stays_light():
    code = (
        "import sys, concur.primitives as p; p.TokenBucket; p.WorkerPool; "
        "heavy = {'sympy', 'pint', 'openpyxl', 'numpy', 'click', 'redis', 'matplotlib'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ENGINE)},
    )
    assert out.stdout.strip() == "[]"
