"""Work-stealing deque (Chase--Lev) and a work-stealing fork/join pool.

How is this designed, and why?
==============================

Work stealing in one paragraph
------------------------------
Each worker owns a deque.  It pushes the tasks it spawns at the *bottom* and
pops the newest one back (LIFO): the child it just created, whose data is
still hot in its cache, and a traversal that stays depth-first so the deque
holds O(depth) tasks.  An idle worker picks a random victim and *steals* from
the *top* (FIFO): the oldest task, which in a divide-and-conquer computation
is the largest remaining subtree, so a few steals balance the load.  Blumofe
and Leiserson (JACM 1999) bound the time by ``T1/P + O(T_inf)`` and the
expected number of steal attempts by ``O(P * T_inf)``.

Worked example (numbers from a run of ``concur bench deque``): summing squares
of ``range(4_000_000)`` by binary splitting into leaves of 2,000 makes a tree
of 4,095 tasks and depth 11.  Run LIFO, the deque never holds more than
``depth * (branching - 1) + 1 = 12`` tasks; run FIFO (breadth-first) it holds
all 2,048 leaves at once.  With 2 workers 1--6 steals per worker balance
the whole tree, because each steal takes half of what is left.

The Chase--Lev deque (SPAA 2005)
--------------------------------
State: a circular array ``buf`` of capacity ``cap`` (a power of two), and two
indices that only grow: ``top`` (next slot to steal) and ``bottom`` (next free
slot).  The items live in ``buf[top % cap] .. buf[(bottom - 1) % cap]``.

* ``push(x)`` (owner): ``buf[bottom % cap] = x``; grow if full; ``bottom += 1``.
* ``pop()`` (owner): ``b = bottom - 1; bottom = b`` *then* read ``t = top``.
  If ``t < b`` the slot is the owner's alone; if ``t == b`` it is the last item
  and the owner races the thieves for it by a compare-and-set ``top: t -> t+1``;
  if ``t > b`` the deque was empty and ``bottom`` is restored.
* ``steal()`` (thief): read ``t = top`` then ``b = bottom``; if ``t < b`` read
  ``buf[t % cap]`` and claim it by CAS ``top: t -> t+1``.  A failed CAS means
  another thief or the owner won: the outcome is ``RETRY``, not an error.

Owner and thieves conflict only over the last item.  The protocol is correct
under sequential consistency, which is what the 2005 paper assumes.

What a native version needs (Lê, Pop, Cohen, Zappa Nardelli, PPoPP 2013)
-----------------------------------------------------------------------
On weak memory (ARM, POWER, and C11 in general) the owner's store to
``bottom`` followed by its load of ``top``, and the thief's load of ``top``
followed by its load of ``bottom``, are store->load and load->load orders that
release/acquire does not provide.  The proven C11 recipe, which crossbeam-deque
follows: push writes the slot, then a **release** fence (or release store)
before publishing ``bottom``; pop stores ``bottom`` relaxed, then a **SeqCst
fence**, then loads ``top``, and takes the last item by a **SeqCst CAS**;
steal loads ``top`` acquire, **SeqCst fence**, loads ``bottom`` acquire, reads
the slot and claims it by a **SeqCst CAS**.  The two SeqCst fences give the
store-load ordering both sides need to see each other's index.  CDSChecker
(Norris and Demsky, OOPSLA 2013) model-checked this published C11 deque and
found bugs in it: any native port must be model-checked or stress-tested, not
trusted on transcription.

What this Python version relies on instead
------------------------------------------
CPython has no user-level fences or CAS.  Under the GIL one bytecode runs at a
time, and a store to an attribute or a list slot is visible to the next
bytecode of any thread: interleavings are sequentially consistent, which is
the model Chase and Lev proved the protocol for.  The CAS on ``top`` is
replaced by ``_top_lock``: a thief takes it *without blocking*
(``acquire(blocking=False)``) and reports ``RETRY`` when it is busy -- the
same outcome as a lost CAS -- then re-checks and advances ``top`` while
holding it.  The owner takes ``_top_lock`` only for the last item and when it
grows or shrinks the array, so the common push and pop are lock-free.

On a free-threaded build (``sys._is_gil_enabled()`` false) plain attribute
accesses give no ordering guarantee, so the owner's ``pop`` takes
``_top_lock`` on every call: correct, and slower, and untested here because
no free-threaded interpreter is packaged for the project's CI.

Consequences
------------
* Correct under any interleaving the GIL allows: every pushed item is popped
  or stolen exactly once (tested with ``sys.setswitchinterval(1e-6)``).
* No parallel speed-up under the GIL: only one thread runs Python at a time,
  so :class:`WorkStealingPool` is a correctness reference and a steal-count and
  space-bound demonstrator.  ``concur bench deque`` measures it next to
  ``multiprocessing`` and a native C locality measurement.

Non-goals
---------
* Batch steals (crossbeam ``steal_batch``), a global injector queue, a LIFO
  slot as in Tokio/Go, or task priorities.
* Using the deque from several owner threads: ``push``/``pop`` from any thread
  but the owner raise ``RuntimeError``.
* ``None`` as an item (``pop`` uses it to mean empty).
"""

from __future__ import annotations

import enum
import random
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

__all__ = ["Steal", "WorkStealingDeque", "WorkStealingPool", "TaskHandle", "PoolStats"]

T = TypeVar("T")

_MIN_CAP = 64
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


class Steal(enum.Enum):
    """Outcome of :meth:`WorkStealingDeque.steal`: a lost race is an outcome, not an error."""

    EMPTY = "empty"  #: nothing to steal right now
    SUCCESS = "success"  #: the item was taken
    RETRY = "retry"  #: lost a race with another thief or the owner; try again


class WorkStealingDeque(Generic[T]):
    """A Chase--Lev deque: one owner thread pushes/pops at the bottom, any thread steals at the top.

    The owner is the first thread that calls :meth:`push` or :meth:`pop`.

    >>> d = WorkStealingDeque()
    >>> for i in (1, 2, 3): d.push(i)
    >>> d.pop(), d.steal()
    (3, (<Steal.SUCCESS: 'success'>, 1))
    >>> d.pop(), d.pop()
    (2, None)
    """

    __slots__ = ("_buf", "_top", "_bottom", "_top_lock", "_owner")

    def __init__(self) -> None:
        self._buf: list[T | None] = [None] * _MIN_CAP
        self._top = 0  # next index to steal; only grows; written under _top_lock
        self._bottom = 0  # next free index; written by the owner only
        # Guards advances of _top (the CAS of the paper) and replacement of
        # _buf (grow/shrink).  Thieves take it non-blocking; the owner takes it
        # only for the last item and for resizing (always, without a GIL).
        self._top_lock = threading.Lock()
        self._owner: int | None = None

    # -- owner side ---------------------------------------------------------
    def _check_owner(self) -> None:
        me = threading.get_ident()
        if self._owner != me:
            if self._owner is None:
                self._owner = me
            else:
                raise RuntimeError(
                    "WorkStealingDeque.push/pop called from a thread that does not own the deque "
                    f"(owner ident {self._owner}, caller {me}); other threads must use steal()"
                )

    def push(self, item: T) -> None:
        """Add ``item`` at the bottom (owner only; never blocks except to grow the array).

        Raises ``ValueError`` for ``None`` and ``RuntimeError`` from a non-owner thread.
        """
        if item is None:
            raise ValueError("WorkStealingDeque cannot hold None: pop() returns None to mean empty")
        self._check_owner()
        if not _GIL:
            with self._top_lock:
                self._push_locked(item)
            return
        b = self._bottom
        buf = self._buf
        if b - self._top >= len(buf):
            with self._top_lock:
                self._resize(2 * len(buf))
            buf = self._buf
        buf[b & (len(buf) - 1)] = item
        self._bottom = b + 1  # publish only after the slot is written

    def pop(self) -> T | None:
        """Remove and return the newest item (LIFO), or ``None`` when empty (owner only)."""
        self._check_owner()
        if not _GIL:
            with self._top_lock:
                return self._pop_locked()
        b = self._bottom - 1
        self._bottom = b  # claim slot b before looking at top (Chase-Lev order)
        t = self._top
        if t < b:
            buf = self._buf
            i = b & (len(buf) - 1)
            item = buf[i]
            buf[i] = None
            if b - t < len(buf) // 4 and len(buf) > _MIN_CAP:
                with self._top_lock:
                    self._resize(len(buf) // 2)
            return item
        if t > b:  # was empty
            self._bottom = t
            return None
        # t == b: the last item; race the thieves for it (the paper's CAS).
        with self._top_lock:
            won = self._top == t
            item = None
            if won:
                buf = self._buf
                i = t & (len(buf) - 1)
                item = buf[i]
                buf[i] = None
                self._top = t + 1
            self._bottom = t + 1
        return item

    def _push_locked(self, item: T) -> None:
        """Push with ``_top_lock`` held (the path used without a GIL)."""
        if self._bottom - self._top >= len(self._buf):
            self._resize(2 * len(self._buf))
        buf = self._buf
        buf[self._bottom & (len(buf) - 1)] = item
        self._bottom += 1

    def _pop_locked(self) -> T | None:
        """LIFO pop with ``_top_lock`` held (the path used without a GIL)."""
        t, b = self._top, self._bottom
        if t >= b:
            return None
        b -= 1
        buf = self._buf
        i = b & (len(buf) - 1)
        item = buf[i]
        buf[i] = None
        self._bottom = b
        if b - t < len(buf) // 4 and len(buf) > _MIN_CAP:
            self._resize(len(buf) // 2)
        return item

    def _resize(self, cap: int) -> None:
        """Copy the live items into a new array of ``cap`` slots.  Caller holds ``_top_lock``."""
        old = self._buf
        t, b = self._top, self._bottom
        new: list[T | None] = [None] * cap
        for k in range(t, b):
            new[k & (cap - 1)] = old[k & (len(old) - 1)]
        self._buf = new

    # -- thief side ---------------------------------------------------------
    def steal(self) -> tuple[Steal, T | None]:
        """Try to take the oldest item (FIFO); any thread, never blocks.

        Returns ``(Steal.SUCCESS, item)``, ``(Steal.EMPTY, None)`` or
        ``(Steal.RETRY, None)`` when it lost a race (retrying may succeed).
        """
        if not self._top_lock.acquire(blocking=False):
            return Steal.RETRY, None
        try:
            t = self._top
            if t >= self._bottom:
                return Steal.EMPTY, None
            buf = self._buf
            i = t & (len(buf) - 1)
            item = buf[i]
            buf[i] = None  # clear before top moves on, so the owner may reuse the slot
            self._top = t + 1
            return Steal.SUCCESS, item
        finally:
            self._top_lock.release()

    def __len__(self) -> int:
        """Approximate number of items (exact when no operation is in flight)."""
        return max(0, self._bottom - self._top)

    def is_empty(self) -> bool:
        """Approximate emptiness (exact when no operation is in flight)."""
        return self._bottom <= self._top


# ---------------------------------------------------------------------------
# The pool


class TaskHandle(Generic[T]):
    """A spawned task.  ``result()`` waits for it by running other tasks meanwhile."""

    __slots__ = ("_fn", "_args", "_pool", "_done", "_value", "_error", "_retrieved")

    def __init__(self, pool: WorkStealingPool, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._fn = fn
        self._args = args
        self._pool = pool
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._retrieved = False

    def done(self) -> bool:
        """True once the task has finished (returned or raised)."""
        return self._done

    def result(self) -> T:
        """The task's return value; re-raises its exception.

        Called inside a task of the same pool, it runs other tasks (its own
        deque first, then steals) until this one is done, so nested waits never
        deadlock.  Called from another thread it simply blocks.
        """
        if not self._done:
            self._pool._help_until(self)
        self._retrieved = True
        if self._error is not None:
            raise self._error
        return self._value

    def _run(self, pool: WorkStealingPool) -> None:
        try:
            self._value = self._fn(pool._spawn, *self._args)
        except BaseException as exc:  # stored and re-raised by result(); the worker survives
            self._error = exc
        self._done = True
        pool._task_finished()


@dataclass
class PoolStats:
    """What the last :meth:`WorkStealingPool.run` did, per worker (index 0 = the caller)."""

    tasks: list[int] = field(default_factory=list)
    steals: list[int] = field(default_factory=list)
    steal_retries: list[int] = field(default_factory=list)
    max_deque: list[int] = field(default_factory=list)


class _Worker:
    __slots__ = ("index", "deque", "rng", "tasks", "steals", "retries", "max_deque")

    def __init__(self, index: int, seed: int | None) -> None:
        self.index = index
        self.deque: WorkStealingDeque[TaskHandle[Any]] = WorkStealingDeque()
        self.rng = random.Random(None if seed is None else seed + index)
        self.tasks = 0
        self.steals = 0
        self.retries = 0
        self.max_deque = 0


class WorkStealingPool:
    """A fork/join pool: ``run(fn, *args)`` calls ``fn(spawn, *args)`` on ``workers`` threads.

    ``spawn(g, *a)`` pushes the task ``g(spawn, *a)`` on the calling worker's
    deque and returns a :class:`TaskHandle`.  The calling thread of ``run`` is
    worker 0; ``workers - 1`` threads are started per run and joined before it
    returns.  ``run`` returns the root's result or raises its exception; if the
    root succeeded but a task whose result nobody retrieved raised, the first
    such exception is raised.  ``run`` waits for every spawned task.

    >>> def fib(spawn, n):
    ...     if n < 2:
    ...         return n
    ...     a = spawn(fib, n - 1)
    ...     return fib(spawn, n - 2) + a.result()
    >>> WorkStealingPool(2).run(fib, 15)
    610
    """

    def __init__(self, workers: int, *, seed: int | None = None) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"WorkStealingPool(workers={workers!r}): expected an int >= 1")
        self.workers = workers
        self._seed = seed
        self.stats = PoolStats()
        # Guards the state of the current run: _running, _pending, _stop,
        # _sleepers and _failed.  Its condition is notified when work is
        # pushed while someone sleeps, when a task finishes, and at shutdown.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._running = False
        self._local = threading.local()
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        self._ws: list[_Worker] = []
        self._pending = 0
        self._stop = False
        self._sleepers = 0
        self._failed: list[TaskHandle[Any]] = []

    # -- public -------------------------------------------------------------
    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(spawn, *args)`` to completion with work stealing; see the class doc."""
        with self._lock:
            if self._running:
                raise RuntimeError("WorkStealingPool.run is already running; one run at a time per pool")
            self._running = True
        self._reset_run_state()
        self._ws = [_Worker(i, self._seed) for i in range(self.workers)]
        root = TaskHandle(self, fn, args)
        threads = [
            threading.Thread(target=self._worker_main, args=(w,), name=f"ws-worker-{w.index}")
            for w in self._ws[1:]
        ]
        self._local.worker = self._ws[0]
        try:
            with self._lock:
                self._pending = 1
            self._ws[0].deque.push(root)
            for th in threads:
                th.start()
            self._work_until(self._ws[0], lambda: self._pending == 0)
        finally:
            with self._lock:
                self._stop = True
                self._changed.notify_all()
            for th in threads:
                if th.ident is not None:  # started
                    th.join()
            self._local.worker = None
            self.stats = PoolStats(
                tasks=[w.tasks for w in self._ws],
                steals=[w.steals for w in self._ws],
                steal_retries=[w.retries for w in self._ws],
                max_deque=[w.max_deque for w in self._ws],
            )
            with self._lock:
                self._running = False
        if root._error is not None:
            raise root._error
        for handle in self._failed:
            if not handle._retrieved and handle._error is not None:
                raise handle._error
        return root._value

    # -- internals ----------------------------------------------------------
    def _spawn(self, fn: Callable[..., Any], *args: Any) -> TaskHandle[Any]:
        worker: _Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            raise RuntimeError("spawn() must be called from inside a task of a running WorkStealingPool")
        handle = TaskHandle(self, fn, args)
        with self._lock:
            self._pending += 1
        worker.deque.push(handle)
        depth = len(worker.deque)
        if depth > worker.max_deque:
            worker.max_deque = depth
        if self._sleepers:  # read after the push: a sleeper that missed the item is counted here
            with self._lock:
                self._changed.notify()
        return handle

    def _task_finished(self) -> None:
        with self._lock:
            self._pending -= 1
            if self._sleepers:
                self._changed.notify_all()

    def _find_task(self, me: _Worker) -> TaskHandle[Any] | None:
        """Own deque first (LIFO), then steal from random victims (FIFO)."""
        task = me.deque.pop()
        if task is not None:
            return task
        n = len(self._ws)
        if n == 1:
            return None
        for _ in range(2 * n):
            victim = self._ws[me.rng.randrange(n)]
            if victim is me:
                continue
            outcome, task = victim.deque.steal()
            if outcome is Steal.SUCCESS:
                me.steals += 1
                return task
            if outcome is Steal.RETRY:
                me.retries += 1
        return None

    def _run_task(self, me: _Worker, task: TaskHandle[Any]) -> None:
        me.tasks += 1
        task._run(self)
        if task._error is not None:
            with self._lock:
                self._failed.append(task)

    def _any_work(self) -> bool:
        return any(not w.deque.is_empty() for w in self._ws)

    def _work_until(self, me: _Worker, finished: Callable[[], bool]) -> None:
        """Run tasks until ``finished()`` is true or the pool stops; sleep when there is nothing to do."""
        while not finished():
            task = self._find_task(me)
            if task is not None:
                self._run_task(me, task)
                continue
            with self._lock:
                self._sleepers += 1
                try:
                    # Re-check under the lock: a push after this point sees
                    # _sleepers > 0 and notifies; a finish always notifies.
                    if not finished() and not self._stop and not self._any_work():
                        self._changed.wait(timeout=0.05)
                finally:
                    self._sleepers -= 1
            if self._stop:
                return

    def _worker_main(self, me: _Worker) -> None:
        self._local.worker = me
        self._work_until(me, lambda: self._stop)

    def _help_until(self, handle: TaskHandle[Any]) -> None:
        me: _Worker | None = getattr(self._local, "worker", None)
        if me is None or me not in self._ws:
            with self._lock:
                while not handle._done and self._running:
                    self._sleepers += 1
                    try:
                        self._changed.wait(timeout=0.05)
                    finally:
                        self._sleepers -= 1
            if not handle._done:
                raise RuntimeError("TaskHandle.result(): the pool's run ended before this task ran")
            return
        self._work_until(me, handle.done)
        if not handle._done:
            raise RuntimeError("TaskHandle.result(): the pool stopped before this task finished")
