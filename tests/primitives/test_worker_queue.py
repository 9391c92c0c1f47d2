"""BoundedQueue and WorkerPool: semantics, the shutdown matrix, conservation under stress."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, deque
from concurrent.futures import CancelledError

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from concur.primitives import (
    BoundedQueue,
    PoolFull,
    PoolMisuse,
    PoolShutdown,
    QueueEmpty,
    WorkerPool,
)


def eventually(predicate, timeout: float = 10.0) -> None:
    """Wait (bounded) for another thread to reach a state; fails instead of hanging."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        pause.wait(0.001)


def test_queue_names_are_exported_from_the_package():
    import concur.primitives as package
    from concur.primitives import worker_queue

    for name in worker_queue.__all__:
        assert name in package.__all__
        assert getattr(package, name) is getattr(worker_queue, name)
    assert package.__all__ == sorted(package._EXPORTS)
    assert issubclass(PoolFull, TimeoutError) and issubclass(QueueEmpty, TimeoutError)
    assert issubclass(PoolMisuse, RuntimeError)


# --- BoundedQueue --------------------------------------------------------------------


def test_queue_fifo_bound_and_timeouts():
    q: BoundedQueue[int] = BoundedQueue(2)
    q.put(1)
    q.put(2)
    with pytest.raises(PoolFull, match="queue full"):
        q.put(3, timeout=0)
    assert q.get() == 1 and q.get(timeout=0) == 2
    with pytest.raises(QueueEmpty):
        q.get(timeout=0.001)
    with pytest.raises(ValueError, match="timeout"):
        q.get(timeout=-1)
    q.task_done(2)
    with pytest.raises(ValueError, match="more times"):
        q.task_done()
    assert q.join(timeout=0)


def test_queue_close_refuses_puts_and_drains_gets():
    q: BoundedQueue[str] = BoundedQueue(3)
    q.put("a")
    q.put("b")
    assert q.close() == []
    assert q.closed
    with pytest.raises(PoolShutdown):
        q.put("c")
    assert [q.get(), q.get()] == ["a", "b"]
    with pytest.raises(PoolShutdown, match="empty"):
        q.get()
    q.close()  # idempotent


def test_queue_close_wakes_blocked_getters_and_putters():
    q: BoundedQueue[int] = BoundedQueue(1)
    outcomes: list[str] = []

    def getter():
        try:
            q.get()
        except PoolShutdown:
            outcomes.append("get woke")

    getters = [threading.Thread(target=getter) for _ in range(3)]
    for t in getters:
        t.start()
    eventually(lambda: q._getters == 3)
    q.close()
    for t in getters:
        t.join(10)
    assert outcomes == ["get woke"] * 3

    q2: BoundedQueue[int] = BoundedQueue(1)
    q2.put(0)

    def putter():
        try:
            q2.put(1)
        except PoolShutdown:
            outcomes.append("put woke")

    putters = [threading.Thread(target=putter) for _ in range(3)]
    for t in putters:
        t.start()
    eventually(lambda: q2._putters == 3)
    assert q2.close(drop_pending=True) == [0]
    for t in putters:
        t.join(10)
    assert outcomes.count("put woke") == 3


class QueueModel(RuleBasedStateMachine):
    """Non-blocking operations on BoundedQueue agree with a deque model."""

    def __init__(self) -> None:
        super().__init__()
        self.q: BoundedQueue[int] = BoundedQueue(3)
        self.model: deque[int] = deque()
        self.closed = False
        self.got = 0

    @rule(x=st.integers())
    def put(self, x):
        if self.closed:
            with pytest.raises(PoolShutdown):
                self.q.put(x, timeout=0)
        elif len(self.model) == 3:
            with pytest.raises(PoolFull):
                self.q.put(x, timeout=0)
        else:
            self.q.put(x, timeout=0)
            self.model.append(x)

    @rule()
    def get(self):
        if self.model:
            assert self.q.get(timeout=0) == self.model.popleft()
            self.got += 1
        else:
            with pytest.raises(PoolShutdown if self.closed else QueueEmpty):
                self.q.get(timeout=0)

    @rule()
    def done(self):
        if self.got:
            self.q.task_done()
            self.got -= 1

    @rule(drop=st.booleans())
    def close(self, drop):
        dropped = self.q.close(drop_pending=drop)
        assert dropped == (list(self.model) if drop else [])
        if drop:
            self.model.clear()
            self.q.task_done(len(dropped))
        self.closed = True

    @invariant()
    def sizes_agree(self):
        assert self.q.qsize() == len(self.model)
        assert self.q._unfinished == len(self.model) + self.got


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)


# --- WorkerPool basics ---------------------------------------------------------------


@pytest.mark.parametrize("workers, bound", [(0, 1), (1, 0), (1.5, 1), (True, 1), (1, "2")])
def test_pool_rejects_bad_sizes(workers, bound):
    with pytest.raises(ValueError, match="integer >= 1"):
        WorkerPool(abs, workers, bound)


def test_failing_task_is_recorded_and_worker_survives():
    def task(x):
        if x % 3 == 0:
            raise KeyError(x)
        return -x

    with WorkerPool(task, workers=2, bound=4) as pool:
        futures = [pool.submit(i) for i in range(30)]
        assert pool.join(timeout=10)
        assert pool.live_workers == 2
    assert pool.completed == 20 and pool.failed == 10
    for i, f in enumerate(futures):
        if i % 3 == 0:
            assert isinstance(f.exception(), KeyError)
        else:
            assert f.result() == -i
    assert pool.state == "terminated"


def test_base_exceptions_do_not_kill_workers():
    def task(x):
        raise SystemExit(x) if x else KeyboardInterrupt

    with WorkerPool(task, workers=1, bound=1) as pool:
        futures = [pool.submit(i) for i in range(3)]
    assert [type(f.exception()) for f in futures] == [
        KeyboardInterrupt,
        SystemExit,
        SystemExit,
    ]
    assert pool.failed == 3


def test_with_block_waits_for_everything_submitted():
    gate = threading.Event()
    done: list[int] = []

    def task(x):
        gate.wait(10)
        done.append(x)

    with WorkerPool(task, workers=2, bound=8) as pool:
        for i in range(8):
            pool.submit(i)
        gate.set()
    assert sorted(done) == list(range(8))


def test_future_cancelled_by_its_owner_is_skipped():
    gate = threading.Event()
    ran: list[int] = []
    with WorkerPool(lambda x: (gate.wait(10), ran.append(x)), workers=1, bound=4) as pool:
        first = pool.submit(0)
        eventually(first.running)
        second = pool.submit(1)
        assert second.cancel()
        gate.set()
    assert ran == [0]
    assert pool.join(timeout=0)


def test_submit_timeout_when_full():
    gate = threading.Event()
    with WorkerPool(lambda x: gate.wait(10), workers=1, bound=1) as pool:
        eventually(pool.submit(0).running)
        pool.submit(1)
        with pytest.raises(PoolFull):
            pool.submit(2, timeout=0.001)
        gate.set()


def test_join_or_shutdown_from_a_worker_is_refused():
    pool: WorkerPool[str, object] = WorkerPool(
        lambda what: pool.join() if what == "join" else pool.shutdown(wait=(what == "wait")),
        workers=1,
        bound=2,
    )
    with pool:
        with pytest.raises(PoolMisuse, match="wait for itself"):
            pool.submit("join").result(timeout=10)
        with pytest.raises(PoolMisuse, match="shutdown"):
            pool.submit("wait").result(timeout=10)
        assert pool.submit("nowait").result(timeout=10) == []  # allowed: it does not wait
        assert pool.state in ("draining", "terminated")
    assert pool.state == "terminated"


def test_fresh_threads_reusing_a_dead_workers_ident_are_not_workers():
    """Regression: workers were recognised by thread ident, and the OS hands an exited
    thread's ident to the next thread it starts, so after shutdown(wait=True) fresh
    threads calling join()/shutdown() got a false PoolMisuse."""
    pool: WorkerPool[int, int] = WorkerPool(lambda x: x, workers=4, bound=4)
    worker_idents = {t.ident for t in pool._threads}
    assert pool.submit(1).result() == 1
    pool.shutdown(wait=True)
    errors: list[BaseException] = []
    fresh_idents: list[int | None] = []

    def caller() -> None:
        fresh_idents.append(threading.get_ident())
        try:
            assert pool.join() is True
            assert pool.shutdown(wait=True) == []
            assert pool.shutdown(wait=False, cancel_pending=True) == []
        except BaseException as exc:
            errors.append(exc)

    for _ in range(50):  # one at a time: each new thread may take the last one's ident
        t = threading.Thread(target=caller)
        t.start()
        t.join()
    assert errors == []
    if sys.platform.startswith("linux"):  # glibc reuses a joined thread's stack, hence its ident
        assert worker_idents & set(fresh_idents), "no ident was reused: the test did not exercise the bug"


# --- the shutdown matrix: state x mode -----------------------------------------------

STATES = ["empty", "full", "producers_blocked", "twice"]


@pytest.mark.parametrize("cancel_pending", [False, True], ids=["drain", "cancel"])
@pytest.mark.parametrize("state", STATES)
def test_shutdown_matrix(state, cancel_pending):
    gate = threading.Event()
    ran: list[int] = []
    pool = WorkerPool(lambda x: (gate.wait(10), ran.append(x)), workers=2, bound=3)
    futures = []
    blocked: list[threading.Thread] = []
    refused: list[int] = []
    if state == "empty":  # consumers blocked in get
        eventually(lambda: pool._queue._getters == 2)
    else:
        futures = [pool.submit(i) for i in range(2)]  # both workers busy
        eventually(lambda: all(f.running() for f in futures))
        futures += [pool.submit(i) for i in range(2, 5)]  # the queue is full
        if state == "producers_blocked":

            def producer(i: int) -> None:
                try:
                    pool.submit(i)
                except PoolShutdown:
                    refused.append(i)

            blocked = [threading.Thread(target=producer, args=(i,)) for i in (10, 11, 12)]
            for t in blocked:
                t.start()
            eventually(lambda: pool._queue._putters == 3)
    if state == "twice":
        assert pool.shutdown(wait=False) == []
        assert pool.state == "draining"
    cancelled = pool.shutdown(wait=False, cancel_pending=cancel_pending)
    assert pool.state == ("cancelling" if cancel_pending else "draining")
    for t in blocked:
        t.join(10)
    assert sorted(refused) == ([10, 11, 12] if blocked else [])
    with pytest.raises(PoolShutdown):
        pool.submit(99)
    gate.set()
    assert pool.shutdown(wait=True, cancel_pending=cancel_pending) == []  # again: harmless
    assert pool.state == "terminated" and pool.live_workers == 0
    assert pool.join(timeout=10)
    queued = [2, 3, 4] if futures else []
    if cancel_pending:
        assert cancelled == queued
        assert sorted(ran) == ([0, 1] if futures else [])
        assert [f.cancelled() for f in futures] == [False, False, True, True, True][: len(futures)]
        for f in futures[2:]:
            with pytest.raises(CancelledError):
                f.result()
    else:
        assert cancelled == []
        assert sorted(ran) == [f_i for f_i in range(len(futures))]
        assert all(f.done() and not f.cancelled() for f in futures)


# --- conservation under stress -------------------------------------------------------


def test_no_item_lost_or_duplicated_with_failures_and_shutdown_mid_stream(
    fast_switching,
):
    """100,000 items, 10% failing, 4 producers, shutdown(cancel) mid-stream, 1 µs switching."""
    total, producers, workers = 100_000, 4, 4
    seen: list[int] = []  # list.append is atomic under the GIL

    def task(x: int) -> int:
        seen.append(x)
        if x % 10 == 0:
            raise ValueError(x)
        return x

    pool = WorkerPool(task, workers=workers, bound=64)
    submitted: list[list[tuple[int, object]]] = [[] for _ in range(producers)]
    refused = [0] * producers
    half = threading.Event()

    def produce(p: int) -> None:
        for x in range(p, total, producers):
            try:
                submitted[p].append((x, pool.submit(x)))
            except PoolShutdown:
                refused[p] = len(range(x, total, producers))
                return
            if len(submitted[p]) == total // producers // 2:
                half.set()

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in threads:
        t.start()
    assert half.wait(30)
    cancelled = pool.shutdown(wait=True, cancel_pending=True)
    for t in threads:
        t.join(30)
    assert pool.join(timeout=10)

    futures = dict(x_f for part in submitted for x_f in part)
    assert len(futures) + sum(refused) == total  # every item was either accepted or refused
    counts = Counter(seen)
    assert max(counts.values()) == 1, "an item ran twice"
    ran = set(counts)
    assert ran.isdisjoint(cancelled) and set(cancelled) | ran == set(futures)
    assert pool.completed + pool.failed == len(ran)
    assert pool.failed == sum(1 for x in ran if x % 10 == 0)
    for x, f in futures.items():
        assert f.done()
        if x in ran:
            assert (f.exception() is not None) == (x % 10 == 0)
        else:
            assert f.cancelled()


def test_drain_shutdown_under_stress_runs_everything(fast_switching):
    total = 20_000
    out: list[int] = []
    with WorkerPool(out.append, workers=6, bound=16) as pool:
        joiners = [threading.Thread(target=pool.join, kwargs={"timeout": 30}) for _ in range(2)]
        for t in joiners:
            t.start()
        for x in range(total):
            pool.submit(x)
    for t in joiners:
        t.join(30)
        assert not t.is_alive()
    assert sorted(out) == list(range(total))


# --- forgotten pools -----------------------------------------------------------------


def test_pool_dropped_without_shutdown_drains_and_ends_its_workers():
    import gc

    out: list[int] = []
    pool = WorkerPool(out.append, workers=2, bound=8)
    for i in range(5):
        pool.submit(i)
    threads = list(pool._threads)
    del pool
    gc.collect()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert sorted(out) == [0, 1, 2, 3, 4]


def test_interpreter_exit_with_a_forgotten_pool_runs_its_items_and_exits():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import threading\n"
        "from concur.primitives import WorkerPool\n"
        "gate = threading.Event()\n"
        "POOL = WorkerPool(lambda x: (gate.wait(), print(x, flush=True)), workers=1, bound=4)\n"
        "for i in range(3):\n"
        "    POOL.submit(i)\n"
        # runs at exit after the pool's own hook: nothing can run before the process exits
        "threading._register_atexit(gate.set)\n"
    )
    engine = Path(__file__).resolve().parents[2] / "engine"
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": str(engine)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1", "2"]


# --- map: the bulk path without per-item futures -------------------------------------


def test_map_returns_results_in_input_order():
    with WorkerPool(lambda x: x * x, workers=3, bound=2) as pool:
        assert pool.map(range(100)) == [x * x for x in range(100)]
        assert pool.map([]) == []
        assert pool.map(iter([5])) == [25]
    assert pool.completed == 101 and pool.failed == 0


def test_map_raises_the_earliest_failure_after_everything_ran():
    ran: list[int] = []

    def task(x: int) -> int:
        ran.append(x)
        if x in (7, 3):
            raise KeyError(x)
        return x

    with WorkerPool(task, workers=2, bound=4) as pool, pytest.raises(KeyError) as info:
        pool.map(range(10))
    assert info.value.args == (3,)
    assert sorted(ran) == list(range(10))
    assert pool.failed == 2 and pool.completed == 8


def test_map_after_shutdown_and_from_a_worker_is_refused():
    pool: WorkerPool[int, object] = WorkerPool(lambda x: pool.map([x]), workers=1, bound=2)
    with pool, pytest.raises(PoolMisuse, match="map"):
        pool.submit(1).result(timeout=10)
    with pytest.raises(PoolShutdown):
        pool.map([1, 2])


def test_map_items_cancelled_by_shutdown_raise_cancelled_error():
    gate = threading.Event()
    pool = WorkerPool(lambda x: (gate.wait(10), x)[1], workers=1, bound=4)
    outcome: list[object] = []

    def run_map() -> None:
        try:
            outcome.append(pool.map([0, 1, 2]))
        except CancelledError as exc:
            outcome.append(str(exc))

    mapper = threading.Thread(target=run_map)
    mapper.start()
    eventually(lambda: pool._queue.qsize() == 2)  # item 0 runs, 1 and 2 wait
    assert pool.shutdown(wait=False, cancel_pending=True) == [1, 2]
    gate.set()
    mapper.join(10)
    assert outcome == ["WorkerPool.map: 2 of 3 items were cancelled by shutdown(cancel_pending=True)"]
    pool.shutdown()
    assert pool.join(timeout=10) and pool.completed == 1


def test_map_timeout_leaves_items_running():
    gate = threading.Event()
    with WorkerPool(lambda x: (gate.wait(10), x)[1], workers=1, bound=1) as pool:
        with pytest.raises(TimeoutError, match="unfinished after 0.01 s"):
            pool.map([0], timeout=0.01)
        with pytest.raises(PoolFull):  # 0 running, 1 queued, 2 finds the queue full
            pool.map([1, 2], timeout=0.01)
        gate.set()
    assert pool.completed == 2


def test_map_and_submit_together_under_stress(fast_switching):
    out: dict[str, object] = {}
    with WorkerPool(lambda x: -x, workers=4, bound=8) as pool:

        def mapper(name: str, start: int) -> None:
            out[name] = pool.map(range(start, start + 3_000))

        def submitter(name: str, start: int) -> None:
            futures = [pool.submit(x) for x in range(start, start + 3_000)]
            out[name] = [f.result(timeout=30) for f in futures]

        threads = [
            threading.Thread(target=mapper, args=("m0", 0)),
            threading.Thread(target=mapper, args=("m1", 10_000)),
            threading.Thread(target=submitter, args=("s0", 20_000)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert out["m0"] == [-x for x in range(3_000)]
    assert out["m1"] == [-x for x in range(10_000, 13_000)]
    assert out["s0"] == [-x for x in range(20_000, 23_000)]
    assert pool.completed == 9_000
