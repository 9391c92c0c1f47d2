"""A bounded queue and a pool of worker threads draining it.

How is this designed, and why?
==============================

State. ``BoundedQueue`` is a FIFO ``deque`` plus four numbers under one lock: the
count of real items (``size``, at most ``bound``), the count of items put but not yet
reported done (``unfinished``), a ``closed`` flag, and how many threads wait to put
or to get. Three conditions share the lock (``not_empty``, ``not_full``,
``all_done``) so a notify never wakes the wrong kind of waiter (the single-condition
deadlock the lemmy/BlockingQueue TLA+ model finds). ``WorkerPool`` owns one queue of
entries and ``workers`` threads that take an entry, run ``fn(item)`` and deliver the
result or the exception: ``submit`` queues ``(future, item)`` and the outcome goes
into that ``concurrent.futures.Future``; ``map`` queues ``(batch, position, item)``
and the outcome goes into one shared record per call (results by position), the
bulk path with no per-item handle.

Per-item cost. A stock ``Future`` costs about 1.5 µs per item before anybody looks
at it (its ``Condition`` is built, taken twice and notified), more than the queue
hand-off itself (0.45 µs) and as much as a small task. ``submit`` therefore returns
a ``PoolFuture`` (``pool_future.py``): a ``Future`` subclass that builds its
``Condition`` only when somebody waits on it or registers a callback, so the worker
finishes an unwatched future with two acquisitions of one plain lock (about 0.4 µs
in all). The worker loop takes the next entry and reports the previous one done
under a single queue-lock acquisition. ``map`` skips the future altogether: one
tuple per item and one lock acquisition to count it done. Measured in
``docs/t7-worker-queue.md`` (``concur bench queue``).

Backpressure. The bound is the point. ``submit`` blocks while ``bound`` items wait,
so a producer faster than the consumers slows down to their pace instead of growing
memory without limit (``ThreadPoolExecutor``'s queue is unbounded). A queued item
waits about ``bound * service_time / workers``: for at most ``D`` seconds of added
latency choose ``bound <= D * workers / service_time``.

Worked example. 4 workers, 50 ms per item, a tolerated queueing delay of 1 s:
``bound <= 1 * 4 / 0.05 = 80``. The pool then completes at most 4 / 0.05 = 80 items/s;
a producer offering 100 items/s blocks in ``submit`` about 20% of the time. At 1 KiB
per item the queue holds about 80 KiB.

Shutdown is one state machine, in ``WorkerPool.shutdown`` and nowhere else::

    RUNNING --shutdown()--------------------> DRAINING --workers exit--> TERMINATED
    RUNNING --shutdown(cancel_pending=True)-> CANCELLING --workers exit--> TERMINATED
    DRAINING --shutdown(cancel_pending=True)-> CANCELLING      (an upgrade; never back)

Every transition closes the queue (``submit`` raises ``PoolShutdown``, producers
blocked in ``submit`` wake and raise) and, the first time, appends exactly one
sentinel per worker *without* needing queue space, so a full queue or stuck
consumers cannot block shutdown. Each worker exits on the first sentinel it takes.
Draining: sentinels sit behind every queued item, so all of them run. Cancelling:
queued items are removed, their futures cancelled and returned to the caller; items
already running finish. Nothing is lost silently and nothing runs twice: every
submitted future ends done, failed or cancelled. Calling shutdown again is harmless.

Failures. A task that raises (anything, ``BaseException`` included) does not kill its
worker: the exception goes into its future and the pool's ``failed`` count. ``join``
cannot hang on a failed task because "done" is reported by the worker loop for every
item, whatever happened inside ``fn``; dropped items are reported done too.

``map`` under shutdown: its items are ordinary queue entries, so draining runs them
and cancelling drops them (they are returned by ``shutdown`` like submitted items,
and ``map`` raises ``CancelledError``); a ``map`` still queueing when shutdown
begins raises ``PoolShutdown``.

Non-goals. Priorities; per-task timeouts or interruption of running tasks (Python
threads cannot be killed); processes; asyncio; a lazy, streaming ``map`` (use
``submit`` to stream). ``qsize`` and the counters are
momentary readings, not snapshots consistent with each other.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Future
from typing import Any, Generic, TypeVar

from .pool_future import PoolFuture

__all__ = [
    "BoundedQueue",
    "PoolFull",
    "PoolMisuse",
    "PoolShutdown",
    "QueueEmpty",
    "WorkerPool",
]

T = TypeVar("T")
R = TypeVar("R")

_SENTINEL: Any = object()  # identity-compared; never handed to user code


class PoolShutdown(RuntimeError):
    """``submit``/``put`` after shutdown, or ``get`` on a closed and empty queue."""


class PoolFull(TimeoutError):
    """``submit``/``put`` with a timeout found the queue still full when it expired."""


class QueueEmpty(TimeoutError):
    """``get`` with a timeout found the queue still empty when it expired."""


class PoolMisuse(RuntimeError):
    """A call that would wait for the calling thread itself (``join`` from a worker)."""


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"WorkerPool: {name} must be an integer >= 1, got {value!r}")
    return value


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if not timeout >= 0:  # negative or NaN
        raise ValueError(f"timeout must be >= 0 seconds or None, got {timeout!r}")
    return time.monotonic() + timeout


class BoundedQueue(Generic[T]):
    """A FIFO holding at most ``bound`` items, with close and task accounting.

    ``put`` blocks while full; ``get`` blocks while empty; ``task_done``/``join``
    count finished items like ``queue.Queue``. ``close()`` makes ``put`` raise
    ``PoolShutdown`` (waking blocked putters) and lets ``get`` return what is queued,
    then raise ``PoolShutdown`` (Python 3.13 ``Queue.shutdown`` semantics).
    """

    def __init__(self, bound: int) -> None:
        self._bound = _positive_int("bound", bound)
        # Guards everything below. The three conditions share it; every wait sits in
        # a loop re-checking its predicate and ``_closed``.
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)  # signalled on put and close
        self._not_full = threading.Condition(self._lock)  # signalled on get and close
        self._all_done = threading.Condition(self._lock)  # signalled when _unfinished hits 0
        self._items: deque[T] = deque()  # real items and, after close, sentinels (_SENTINEL is typed Any)
        self._size = 0  # real items in _items
        self._unfinished = 0  # items put and not yet reported done
        self._closed = False
        self._getters = 0  # threads waiting in get: notify only when someone listens
        self._putters = 0  # threads waiting in put

    @property
    def bound(self) -> int:
        """The most real items the queue holds."""
        return self._bound

    def qsize(self) -> int:
        """Real items queued now (a momentary reading)."""
        return self._size

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._closed

    def put(self, item: T, timeout: float | None = None) -> None:
        """Append ``item``, blocking while the queue is full.

        Raises ``PoolShutdown`` if the queue is or becomes closed, ``PoolFull`` if
        ``timeout`` seconds pass while full (0 means do not block).
        """
        with self._lock:
            if self._size >= self._bound and not self._closed:
                deadline = _deadline(timeout)
                self._putters += 1
                try:
                    while self._size >= self._bound and not self._closed:
                        if deadline is None:
                            self._not_full.wait()
                        else:
                            left = deadline - time.monotonic()
                            if left <= 0:
                                raise PoolFull(
                                    f"queue full ({self._bound} items) for {timeout} s; "
                                    "consumers are slower than producers"
                                )
                            self._not_full.wait(left)
                finally:
                    self._putters -= 1
            if self._closed:
                raise PoolShutdown("queue is shut down; no new items are accepted")
            self._items.append(item)
            self._size += 1
            self._unfinished += 1
            if self._getters:
                self._not_empty.notify()

    def get(self, timeout: float | None = None) -> T:
        """Remove and return the oldest item, blocking while the queue is empty.

        Raises ``PoolShutdown`` when closed and empty, ``QueueEmpty`` if ``timeout``
        seconds pass while empty. Each item got must be reported with ``task_done``.
        """
        with self._lock:
            return self._get_locked(timeout)

    def _done_and_get(self, done: int) -> T:
        """``task_done(done)`` then ``get()`` under one lock acquisition (worker loop)."""
        with self._lock:
            if done:
                self._report_done_locked(done)
            return self._get_locked(None)

    def _get_locked(self, timeout: float | None) -> T:
        """``get`` body; the caller holds ``_lock``."""
        items = self._items
        if not items:
            deadline = _deadline(timeout)
            self._getters += 1
            try:
                while not items:
                    if self._closed:
                        raise PoolShutdown("queue is shut down and empty")
                    if deadline is None:
                        self._not_empty.wait()
                    else:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise QueueEmpty(f"queue empty for {timeout} s")
                        self._not_empty.wait(left)
            finally:
                self._getters -= 1
        item = items.popleft()
        if item is not _SENTINEL:
            self._size -= 1
            if self._putters:
                self._not_full.notify()
        return item

    def task_done(self, count: int = 1) -> None:
        """Report ``count`` got items finished. Raises ``ValueError`` if more than put."""
        with self._lock:
            self._report_done_locked(count)

    def _report_done_locked(self, count: int) -> None:
        """``task_done`` body; the caller holds ``_lock``."""
        left = self._unfinished - count
        if left < 0:
            raise ValueError("task_done() called more times than there were items")
        self._unfinished = left
        if left == 0:
            self._all_done.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every item put has been reported done; False if ``timeout`` passed."""
        with self._lock:
            deadline = _deadline(timeout)
            while self._unfinished:
                if deadline is None:
                    self._all_done.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._all_done.wait(left)
            return True

    def close(self, *, sentinels: int = 0, drop_pending: bool = False) -> list[T]:
        """Refuse new items, wake every waiter, optionally drop what is queued.

        Appends ``sentinels`` sentinel objects behind the queued items without
        needing free space. With ``drop_pending`` removes every queued real item
        (sentinels stay) and returns them, oldest first; they still count as
        unfinished until the caller reports them with ``task_done``. Idempotent.
        """
        with self._lock:
            self._closed = True
            dropped: list[T] = []
            if drop_pending and self._size:
                dropped = [x for x in self._items if x is not _SENTINEL]
                kept = [x for x in self._items if x is _SENTINEL]
                self._items.clear()
                self._items.extend(kept)
                self._size = 0
            self._items.extend([_SENTINEL] * sentinels)
            self._not_empty.notify_all()
            self._not_full.notify_all()
            return dropped


class _Batch:
    """The shared record of one ``WorkerPool.map`` call: results by input position.

    ``results`` and ``errors`` are written by workers at distinct positions;
    ``finished``, ``cancelled`` and ``total`` are guarded by ``lock``.
    """

    __slots__ = (
        "all_done",
        "cancelled",
        "errors",
        "finished",
        "lock",
        "results",
        "total",
    )

    def __init__(self) -> None:
        self.results: list[Any] = []  # the producer appends a slot before queueing
        self.errors: dict[int, BaseException] = {}  # position -> what fn raised
        # Guards finished, cancelled and total; all_done is set under it.
        self.lock = threading.Lock()
        self.finished = 0  # positions run, failed or cancelled
        self.cancelled = 0  # positions dropped by shutdown(cancel_pending=True)
        self.total = -1  # positions queued; -1 while the producer is still queueing
        self.all_done = threading.Event()

    def finish_one(self, cancelled: bool = False) -> None:
        """Count one position settled; set ``all_done`` when the last one is."""
        with self.lock:
            self.finished += 1
            self.cancelled += cancelled
            if self.finished == self.total:
                self.all_done.set()

    def close(self, total: int) -> None:
        """Record how many positions were queued (the producer is done)."""
        with self.lock:
            self.total = total
            if self.finished == total:
                self.all_done.set()


def _work(fn: Callable[[Any], Any], queue: BoundedQueue[Any], stats: list[int]) -> None:
    """One worker: run items until its sentinel. ``stats`` is this worker's [ok, failed].

    An entry is ``(future, item)`` from ``submit`` or ``(batch, position, item)``
    from ``map``. Whatever ``fn`` raises is recorded, never propagated.
    """
    done = 0
    take = queue._done_and_get
    while True:
        try:
            entry = take(done)
        except PoolShutdown:  # closed and empty without a sentinel left for us
            return
        if entry is _SENTINEL:
            return
        done = 1
        if len(entry) == 2:
            # True: returned, False: raised (kept in the future), None: cancelled
            outcome = entry[0].run(fn, entry[1])
            if outcome:
                stats[0] += 1
            elif outcome is not None:
                stats[1] += 1
        else:
            batch, position, item = entry
            try:
                batch.results[position] = fn(item)
            except BaseException as exc:
                batch.errors[position] = exc
                stats[1] += 1
            else:
                stats[0] += 1
            batch.finish_one()


# Queues of pools whose workers may still run, with their worker counts. Interpreter
# exit joins non-daemon threads *before* atexit handlers run, so a pool nobody shut
# down is drained by this hook, which threading runs before that join.
_LIVE_QUEUES: weakref.WeakKeyDictionary[BoundedQueue[Any], int] = weakref.WeakKeyDictionary()


def _drain_all_at_exit() -> None:
    for queue, workers in list(_LIVE_QUEUES.items()):
        queue.close(sentinels=workers)


threading._register_atexit(_drain_all_at_exit)  # type: ignore[attr-defined]

RUNNING, DRAINING, CANCELLING, TERMINATED = (
    "running",
    "draining",
    "cancelling",
    "terminated",
)


class WorkerPool(Generic[T, R]):
    """``workers`` threads running ``fn`` on submitted items, at most ``bound`` queued.

    ``submit(item)`` returns a ``concurrent.futures.Future`` and blocks while the
    queue is full. Leaving a ``with`` block calls ``shutdown(wait=True)``, which waits
    for everything submitted. Raises ``ValueError`` for ``workers < 1`` or
    ``bound < 1``.

    >>> with WorkerPool(lambda x: x * x, workers=2, bound=4) as pool:
    ...     futures = [pool.submit(i) for i in range(5)]
    >>> [f.result() for f in futures]
    [0, 1, 4, 9, 16]
    """

    def __init__(
        self,
        fn: Callable[[T], R],
        workers: int,
        bound: int,
        *,
        name: str = "concur-worker",
    ) -> None:
        if not callable(fn):
            raise TypeError(f"WorkerPool: fn must be callable, got {fn!r}")
        workers = _positive_int("workers", workers)
        # Entries: (future, item) from submit, (batch, position, item) from map.
        self._queue: BoundedQueue[tuple[Any, ...]] = BoundedQueue(bound)
        # Guards _state: makes each shutdown transition atomic (one state machine).
        self._state_lock = threading.Lock()
        self._state = RUNNING
        self._stats = [[0, 0] for _ in range(workers)]  # per worker [ok, failed]; one writer each
        self._threads = [
            threading.Thread(
                target=_work,
                args=(fn, self._queue, stats),
                name=f"{name}-{i}",
                daemon=False,
            )
            for i, stats in enumerate(self._stats)
        ]
        # The workers themselves, not their idents: an ident is reused by the next thread
        # the OS starts once a worker has exited, so a set of idents would mistake a
        # fresh thread for a worker after shutdown. Read-only after this line.
        self._workers = frozenset(self._threads)
        for thread in self._threads:
            thread.start()
        # A pool dropped or forgotten without shutdown must not leave non-daemon
        # threads blocked forever: closing its queue drains it and ends the workers.
        weakref.finalize(self, self._queue.close, sentinels=workers)
        _LIVE_QUEUES[self._queue] = workers

    @property
    def state(self) -> str:
        """ "running", "draining", "cancelling" or "terminated"."""
        if self._state != RUNNING and not any(t.is_alive() for t in self._threads):
            return TERMINATED
        return self._state

    @property
    def completed(self) -> int:
        """Tasks that returned normally (sum of per-worker counts; a momentary reading)."""
        return sum(s[0] for s in self._stats)

    @property
    def failed(self) -> int:
        """Tasks that raised; each exception is also in its future."""
        return sum(s[1] for s in self._stats)

    @property
    def live_workers(self) -> int:
        """Worker threads still running."""
        return sum(t.is_alive() for t in self._threads)

    def submit(self, item: T, timeout: float | None = None) -> Future[R]:
        """Queue ``item`` for ``fn`` and return its future; blocks while the queue is full.

        The future is a ``concurrent.futures.Future`` (a ``PoolFuture``, which makes
        its Condition only when somebody waits on it). Raises ``PoolShutdown`` once
        shutdown has begun (also waking a blocked submit), ``PoolFull`` when
        ``timeout`` seconds pass while full.
        """
        future: PoolFuture[R] = PoolFuture()
        self._queue.put((future, item), timeout)
        return future

    def map(self, items: Iterable[T], timeout: float | None = None) -> list[R]:
        """Run ``fn`` on every item and return the results in input order.

        The bulk path: no future per item, one shared record for the call. Blocks
        while the queue is full (backpressure, as ``submit``) and then until every
        item has run, so all results are held in memory at once; use ``submit``
        to stream. If any task raised, raises the exception of the earliest such
        item once all have run (the others' results are discarded), as
        ``Executor.map`` would when reaching it. Raises ``PoolShutdown`` at once
        if shutdown begins while items are still being queued (those already
        queued drain or are cancelled with the pool), ``CancelledError`` if
        ``shutdown(cancel_pending=True)`` dropped some of its items,
        ``PoolFull``/``TimeoutError`` when ``timeout`` seconds (for the whole
        call) pass while queueing/waiting, and ``PoolMisuse`` from a worker.

        >>> with WorkerPool(lambda x: x * x, workers=2, bound=4) as pool:
        ...     pool.map(range(5))
        [0, 1, 4, 9, 16]
        """
        self._check_not_worker("map")
        deadline = _deadline(timeout)
        batch = _Batch()
        results = batch.results
        put = self._queue.put
        position = 0
        try:
            if deadline is None:
                for item in items:
                    results.append(None)
                    put((batch, position, item))
                    position += 1
            else:
                for item in items:
                    results.append(None)
                    put((batch, position, item), max(0.0, deadline - time.monotonic()))
                    position += 1
        finally:
            batch.close(position)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not batch.all_done.wait(left):
            raise TimeoutError(
                f"WorkerPool.map: {position - batch.finished} of {position} items "
                f"unfinished after {timeout} s; they stay queued and still run"
            )
        if batch.cancelled:
            raise CancelledError(
                f"WorkerPool.map: {batch.cancelled} of {position} items were cancelled by shutdown(cancel_pending=True)"
            )
        if batch.errors:
            raise batch.errors[min(batch.errors)]
        return results

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every item submitted so far is done, failed or cancelled.

        Returns False if ``timeout`` passed first. Raises ``PoolMisuse`` from a worker
        (it would wait for itself).
        """
        self._check_not_worker("join")
        return self._queue.join(timeout)

    def shutdown(self, wait: bool = True, cancel_pending: bool = False) -> list[T]:
        """Stop accepting items; drain (default) or cancel what is queued.

        Returns the items whose futures were cancelled by this call. Running tasks
        always finish. With ``wait`` blocks until every worker has exited. Idempotent;
        a later call may upgrade draining to cancelling. Raises ``PoolMisuse`` when
        called with ``wait=True`` from a worker.
        """
        if wait:
            self._check_not_worker("shutdown(wait=True)")
        with self._state_lock:
            first = self._state == RUNNING
            if cancel_pending:
                self._state = CANCELLING
            elif first:
                self._state = DRAINING
            dropped = self._queue.close(
                sentinels=len(self._threads) if first else 0,
                drop_pending=cancel_pending,
            )
        for entry in dropped:
            if len(entry) == 2:
                entry[0].cancel()
            else:
                entry[0].finish_one(cancelled=True)
        if dropped:
            self._queue.task_done(len(dropped))
        if wait:
            for thread in self._threads:
                thread.join()
        return [entry[-1] for entry in dropped]

    def _check_not_worker(self, what: str) -> None:
        # current_thread() is the Thread object of the running thread; a thread that
        # merely reuses an exited worker's ident is a different object.
        if threading.current_thread() in self._workers:
            raise PoolMisuse(
                f"WorkerPool.{what} called from one of the pool's own workers would wait "
                "for itself; call it from the thread that owns the pool"
            )

    def __enter__(self) -> WorkerPool[T, R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)
