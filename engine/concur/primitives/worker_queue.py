"""A bounded queue and a pool of worker threads draining it.

How is this designed, and why?
==============================

State. ``BoundedQueue`` is a FIFO ``deque`` plus four numbers under one lock: the
count of real items (``size``, at most ``bound``), the count of items put but not yet
reported done (``unfinished``), a ``closed`` flag, and how many threads wait to put
or to get. Three conditions share the lock (``not_empty``, ``not_full``,
``all_done``) so a notify never wakes the wrong kind of waiter (the single-condition
deadlock the lemmy/BlockingQueue TLA+ model finds). ``WorkerPool`` owns one queue of
``(Future, item)`` pairs and ``workers`` threads that take a pair, run ``fn(item)``,
and put the result or the exception into the ``concurrent.futures.Future``.

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

Non-goals. Priorities; per-task timeouts or interruption of running tasks (Python
threads cannot be killed); processes; asyncio. ``qsize`` and the counters are
momentary readings, not snapshots consistent with each other.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

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
        self._all_done = threading.Condition(
            self._lock
        )  # signalled when _unfinished hits 0
        self._items: deque[Any] = deque()  # real items and, after close, sentinels
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

    def _done_and_get(self, done: int) -> Any:
        """``task_done(done)`` then ``get()`` under one lock acquisition (worker loop)."""
        with self._lock:
            if done:
                self._report_done_locked(done)
            return self._get_locked(None)

    def _get_locked(self, timeout: float | None) -> Any:
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


def _work(fn: Callable[[Any], Any], queue: BoundedQueue[Any], stats: list[int]) -> None:
    """One worker: run items until its sentinel. ``stats`` is this worker's [ok, failed]."""
    done = 0
    while True:
        try:
            entry = queue._done_and_get(done)
        except PoolShutdown:  # closed and empty without a sentinel left for us
            return
        if entry is _SENTINEL:
            return
        done = 1
        future, item = entry
        if (
            not future.set_running_or_notify_cancel()
        ):  # cancelled by its owner while queued
            continue
        try:
            result = fn(item)
        except BaseException as exc:  # noqa: BLE001 -- the worker survives anything a task raises
            future.set_exception(exc)
            stats[1] += 1
        else:
            future.set_result(result)
            stats[0] += 1


# Queues of pools whose workers may still run, with their worker counts. Interpreter
# exit joins non-daemon threads *before* atexit handlers run, so a pool nobody shut
# down is drained by this hook, which threading runs before that join.
_LIVE_QUEUES: weakref.WeakKeyDictionary[BoundedQueue[Any], int] = (
    weakref.WeakKeyDictionary()
)


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
        self._queue: BoundedQueue[tuple[Future[R], T]] = BoundedQueue(bound)
        # Guards _state: makes each shutdown transition atomic (one state machine).
        self._state_lock = threading.Lock()
        self._state = RUNNING
        self._stats = [
            [0, 0] for _ in range(workers)
        ]  # per worker [ok, failed]; one writer each
        self._threads = [
            threading.Thread(
                target=_work,
                args=(fn, self._queue, stats),
                name=f"{name}-{i}",
                daemon=False,
            )
            for i, stats in enumerate(self._stats)
        ]
        self._idents: set[int] = set()
        for thread in self._threads:
            thread.start()
            self._idents.add(thread.ident)  # type: ignore[arg-type]
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

        Raises ``PoolShutdown`` once shutdown has begun (also waking a blocked
        submit), ``PoolFull`` when ``timeout`` seconds pass while full.
        """
        future: Future[R] = Future()
        self._queue.put((future, item), timeout)
        return future

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
        for future, _ in dropped:
            future.cancel()
        if dropped:
            self._queue.task_done(len(dropped))
        if wait:
            for thread in self._threads:
                thread.join()
        return [item for _, item in dropped]

    def _check_not_worker(self, what: str) -> None:
        if threading.get_ident() in self._idents:
            raise PoolMisuse(
                f"WorkerPool.{what} called from one of the pool's own workers would wait "
                "for itself; call it from the thread that owns the pool"
            )

    def __enter__(self) -> WorkerPool[T, R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)
