"""PoolFuture behaves as concurrent.futures.Future, and stays cheap while nobody waits."""

from __future__ import annotations

import threading
from concurrent.futures import (
    FIRST_COMPLETED,
    FIRST_EXCEPTION,
    CancelledError,
    Future,
    InvalidStateError,
    as_completed,
    wait,
)

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concur.primitives import WorkerPool
from concur.primitives.pool_future import PoolFuture

OPS = [
    "set_running",
    "set_result",
    "set_exception",
    "cancel",
    "done",
    "running",
    "cancelled",
    "result",
    "exception",
    "callback",
]


def _apply(future: Future, op: str, log: list[object]) -> object:
    """Run ``op`` on ``future``; return what it returned or the type of what it raised."""
    try:
        if op == "set_running":
            return future.set_running_or_notify_cancel()
        if op == "set_result":
            return future.set_result(7)
        if op == "set_exception":
            return future.set_exception(KeyError("k"))
        if op == "cancel":
            return future.cancel()
        if op in ("done", "running", "cancelled"):
            return getattr(future, op)()
        if op == "result":
            return future.result(timeout=0)
        if op == "exception":
            error = future.exception(timeout=0)
            return None if error is None else repr(error)
        future.add_done_callback(lambda f: log.append(("called", f.done())))
        return None
    except (
        CancelledError,
        InvalidStateError,
        RuntimeError,
        TimeoutError,
        KeyError,
    ) as exc:
        return type(exc).__name__


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(OPS), max_size=8))
def test_same_outcomes_as_the_stock_future(ops):
    """Any sequence of calls gives the stock Future's results, raises and callbacks."""
    stock, ours = Future(), PoolFuture()
    stock_log: list[object] = []
    our_log: list[object] = []
    for op in ops:
        expected = _apply(stock, op, stock_log)
        assert _apply(ours, op, our_log) == expected, (op, ops)
        assert our_log == stock_log
    assert ours._state == stock._state
    assert isinstance(ours, Future)


def test_an_untouched_pool_future_never_makes_a_condition():
    with WorkerPool(lambda x: x + 1, workers=2, bound=8) as pool:
        futures = [pool.submit(i) for i in range(50)]
    assert [f.result() for f in futures] == list(range(1, 51))
    assert all(f.done() and not f.running() and not f.cancelled() for f in futures)
    assert not any("_condition" in vars(f) for f in futures)


def test_a_waiter_blocked_before_the_result_is_woken():
    gate = threading.Event()
    with WorkerPool(lambda x: (gate.wait(10), x)[1], workers=1, bound=2) as pool:
        future = pool.submit("v")
        got: list[object] = []
        waiter = threading.Thread(target=lambda: got.append(future.result(timeout=10)))
        waiter.start()
        while "_condition" not in vars(future):  # the waiter made the Condition
            threading.Event().wait(0.001)
        gate.set()
        waiter.join(10)
    assert got == ["v"]


def test_callbacks_run_once_in_order_before_and_after_completion():
    gate = threading.Event()
    calls: list[tuple[str, object]] = []
    with WorkerPool(lambda x: (gate.wait(10), x * 2)[1], workers=1, bound=2) as pool:
        future = pool.submit(21)
        future.add_done_callback(lambda f: calls.append(("a", f.result())))
        future.add_done_callback(lambda f: calls.append(("b", f.result())))
        gate.set()
    future.add_done_callback(lambda f: calls.append(("late", f.result())))
    assert calls == [("a", 42), ("b", 42), ("late", 42)]


def test_wait_and_as_completed_work_on_pool_futures():
    release = {i: threading.Event() for i in range(4)}

    def task(i: int) -> int:
        release[i].wait(10)
        if i == 2:
            raise ValueError(i)
        return i

    with WorkerPool(task, workers=4, bound=4) as pool:
        futures = [pool.submit(i) for i in range(4)]
        release[1].set()
        done, not_done = wait(futures, timeout=10, return_when=FIRST_COMPLETED)
        assert done == {futures[1]} and len(not_done) == 3
        release[2].set()
        done, _ = wait(futures, timeout=10, return_when=FIRST_EXCEPTION)
        assert futures[2] in done and isinstance(futures[2].exception(), ValueError)
        order = []
        for i in (3, 0):
            release[i].set()
        for future in as_completed(futures, timeout=10):
            order.append(futures.index(future))
    assert sorted(order) == [0, 1, 2, 3] and set(order[:2]) == {1, 2}
    done, not_done = wait(futures, timeout=0)
    assert len(done) == 4 and not not_done


def test_cancel_races_the_worker_and_exactly_one_wins(fast_switching):
    """A user cancel() against the worker's set_running: one wins, never both or neither."""
    for _ in range(2_000):
        future: PoolFuture[int] = PoolFuture()
        outcome: dict[str, bool] = {}
        start = threading.Barrier(2)

        def cancel(
            f: PoolFuture[int] = future,
            start: threading.Barrier = start,
            outcome: dict[str, bool] = outcome,
        ) -> None:
            start.wait()
            outcome["cancelled"] = f.cancel()

        thread = threading.Thread(target=cancel)
        thread.start()
        start.wait()
        outcome["ran"] = future.set_running_or_notify_cancel()
        thread.join(10)
        if outcome["ran"]:
            future.set_result(1)
        assert outcome["ran"] != outcome["cancelled"]
        assert future.done()
        with pytest.raises(CancelledError) if outcome["cancelled"] else _no_error():
            assert future.result(timeout=0) == 1


def test_result_waiters_racing_completion_never_hang(fast_switching):
    """Waiters that make the Condition while the worker completes lazily are woken."""
    for i in range(2_000):
        future: PoolFuture[int] = PoolFuture()
        got: list[int] = []
        waiter = threading.Thread(target=lambda f=future, got=got: got.append(f.result(timeout=10)))
        waiter.start()
        assert future.set_running_or_notify_cancel()
        future.set_result(i)
        waiter.join(10)
        assert not waiter.is_alive() and got == [i]


class _no_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
