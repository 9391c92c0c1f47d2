"""AsyncTokenBucket's waiter queue: FIFO admission, one timer, cancellation and timeouts.

Every test runs on a virtual-time event loop (``run_virtual``): the loop's clock is the
bucket's fake clock and jumps to the next timer instead of sleeping, so admission
times are exact and nothing depends on the machine's speed. Effort is counted as
readings of the bucket's clock, one per decision (a poller makes O(waiters) of them per token).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from concur.primitives import AsyncTokenBucket


def counting(clock: Any) -> tuple[Any, list[int]]:
    """A clock that counts its readings: the bucket reads it once per decision."""
    calls = [0]

    def read() -> float:
        calls[0] += 1
        return float(clock.now)

    return read, calls


def test_a_thousand_waiters_are_admitted_first_come_first_served_at_the_rate(clock, run_virtual):
    counted, calls = counting(clock)
    bucket = AsyncTokenBucket(1, 10, counted, initial=0)
    order: list[int] = []
    times: list[float] = []
    start = clock.now

    async def one(i: int) -> None:
        assert await bucket.acquire()
        order.append(i)
        times.append(clock.now - start)

    async def scenario() -> None:
        await asyncio.gather(*(one(i) for i in range(1000)))

    run_virtual(scenario())
    assert order == list(range(1000))
    assert times[0] == pytest.approx(0.1) and times[-1] == pytest.approx(100.0)
    assert all(b > a for a, b in itertools.pairwise(times))  # one at a time, at the rate
    # each caller tries once on arrival, each wake admits one and is denied for the next:
    # about 3 decisions per admission; polling waiters would make ~1,000 per admission
    assert calls[0] <= 3 * 1000 + 2
    assert bucket.waiting == 0


def test_a_large_head_is_not_overtaken_by_small_requests_behind_it(clock, run_virtual):
    bucket = AsyncTokenBucket(4, 1, clock, initial=0)
    order: list[tuple[str, float]] = []
    start = clock.now

    async def one(name: str, n: float) -> None:
        assert await bucket.acquire(n)
        order.append((name, clock.now - start))

    async def scenario() -> None:
        await asyncio.gather(one("big", 4), one("small1", 1), one("small2", 1))

    run_virtual(scenario())
    assert [name for name, _ in order] == ["big", "small1", "small2"]
    assert [t for _, t in order] == pytest.approx([4.0, 5.0, 6.0])


def test_try_acquire_does_not_barge_past_the_queue(clock, run_virtual):
    bucket = AsyncTokenBucket(2, 1, clock, initial=0)

    async def scenario() -> None:
        waiter = asyncio.ensure_future(bucket.acquire(2))
        await asyncio.sleep(0)  # the waiter is queued for t+2
        assert bucket.waiting == 1
        clock.advance(1.0)  # one token accrued: free, but owed to the head
        denied = bucket.try_acquire(1)
        assert not denied.allowed and denied.retry_after == pytest.approx(2.0)
        assert not bucket.peek(1).allowed
        assert await waiter
        assert bucket.try_acquire(1).allowed is False and bucket.waiting == 0

    run_virtual(scenario())


def test_cancelling_the_head_rearms_the_timer_for_the_next_waiter(clock, run_virtual):
    bucket = AsyncTokenBucket(5, 1, clock, initial=0)
    start = clock.now
    admitted: list[tuple[str, float]] = []

    async def one(name: str, n: float) -> None:
        assert await bucket.acquire(n)
        admitted.append((name, clock.now - start))

    async def scenario() -> None:
        head = asyncio.ensure_future(one("head", 5))  # due at t+5
        middle = asyncio.ensure_future(one("middle", 1))
        tail = asyncio.ensure_future(one("tail", 1))
        await asyncio.sleep(0)
        assert bucket.waiting == 3
        await asyncio.sleep(1.0)
        head.cancel()
        middle.cancel()
        await tail
        for task in (head, middle):
            with pytest.raises(asyncio.CancelledError):
                await task

    run_virtual(scenario())
    # the tail's one token had accrued by t+1: it is served at once, not at the head's t+5
    assert admitted == [("tail", pytest.approx(1.0))]
    assert bucket.waiting == 0 and bucket._queued == 0.0


def test_a_waiter_cancelled_after_its_tokens_were_handed_over_gives_them_back(clock, run_virtual):
    bucket = AsyncTokenBucket(3, 1, clock, initial=0)

    async def scenario() -> None:
        waiter = asyncio.ensure_future(bucket.acquire(3))
        await asyncio.sleep(0)
        clock.advance(3.0)
        bucket._rearm()  # the timer's work, done now: the 3 tokens are handed to the waiter
        assert bucket.waiting == 0 and bucket._bucket.peek(1).remaining == pytest.approx(0.0, abs=1e-9)
        waiter.cancel()  # before the waiter ran: it never uses them
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert bucket.try_acquire(3).allowed  # given back, all three

    run_virtual(scenario())


def test_a_timeout_shorter_than_the_queue_ahead_is_refused_at_once(clock, run_virtual):
    bucket = AsyncTokenBucket(10, 2, clock, initial=0)
    start = clock.now

    async def scenario() -> list[Any]:
        first = asyncio.ensure_future(bucket.acquire(4))  # due at t+2
        await asyncio.sleep(0)
        t0 = clock.now
        # behind 4 queued tokens, 2 more need (4 + 2) / 2 = 3 s
        assert await bucket.acquire(2, timeout=2.9) is False
        assert clock.now == t0 and bucket.waiting == 1  # refused without waiting, queue intact
        second = asyncio.ensure_future(bucket.acquire(2, timeout=3.0))
        return [await first, await second, clock.now - start]

    assert run_virtual(scenario()) == [True, True, pytest.approx(3.0)]
    assert bucket.waiting == 0


def test_a_waiter_whose_tokens_are_taken_by_a_thread_times_out_on_its_deadline(clock, run_virtual):
    bucket = AsyncTokenBucket(2, 1, clock, initial=0)
    start = clock.now

    async def scenario() -> list[Any]:
        late = asyncio.ensure_future(bucket.acquire(2, timeout=2.5))  # eta t+2, deadline t+2.5
        behind = asyncio.ensure_future(bucket.acquire(1))
        await asyncio.sleep(0)
        clock.advance(1.9)
        assert bucket._bucket.try_acquire(1).allowed  # another thread takes a token under the lock
        got = await late
        at = clock.now - start
        return [got, at, await behind, bucket.waiting]

    got, at, behind_ok, waiting = run_virtual(scenario())
    assert got is False and at == pytest.approx(2.5)
    assert behind_ok is True and waiting == 0


def test_many_waiters_with_random_cancellations_keep_the_queue_consistent(clock, run_virtual):
    import random

    rng = random.Random(7)
    bucket = AsyncTokenBucket(3, 5, clock, initial=0)
    admitted: list[int] = []

    async def one(i: int, n: int) -> None:
        if await bucket.acquire(n, timeout=rng.choice([None, 1.0, 50.0])):
            admitted.append(i)

    async def scenario() -> None:
        tasks = [asyncio.ensure_future(one(i, rng.randint(1, 3))) for i in range(300)]
        await asyncio.sleep(0)
        for _ in range(60):
            await asyncio.sleep(rng.random() * 0.5)
            rng.choice(tasks).cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    run_virtual(scenario())
    assert admitted == sorted(admitted)  # whoever was admitted was admitted in arrival order
    assert len(admitted) > 100
    assert bucket.waiting == 0 and bucket._queued == pytest.approx(0.0) and bucket._timer is None


def test_waiters_left_on_a_closed_loop_do_not_block_the_next_loop(clock, virtual_loop):
    """A loop closed while tasks still waited (no cancellation ran): its queue is dropped, not waited on."""
    bucket = AsyncTokenBucket(1, 1, clock, initial=0)
    old = virtual_loop()
    stranded = old.create_task(bucket.acquire())
    old.run_until_complete(asyncio.sleep(0))  # the task is queued; its timer is on this loop
    assert bucket.waiting == 1
    old.close()  # closed with the task pending: nothing will ever serve or cancel it
    stranded._log_destroy_pending = False  # type: ignore[attr-defined]
    clock.advance(1.0)
    assert bucket.try_acquire().allowed  # the stranded waiter holds nobody back
    assert bucket.waiting == 0
    clock.advance(1.0)
    new = virtual_loop()
    try:
        assert new.run_until_complete(bucket.acquire()) is True
        assert new.run_until_complete(bucket.acquire()) is True  # waits 1 s of virtual time on the new loop
    finally:
        new.close()
