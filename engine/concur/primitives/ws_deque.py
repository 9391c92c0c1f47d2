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
The protocol above exists because a native deque has no atomic "take from
either end": owner and thieves must agree on the last item through ``top``,
``bottom`` and a CAS.  CPython already has such an object: with the GIL, each
of ``collections.deque.append``, ``.pop`` and ``.popleft`` is a single C call
that holds the GIL from start to end and runs no Python code (no ``__eq__``,
no ``__del__``: nothing is compared, and with no ``maxlen`` nothing is dropped
and freed), so no other thread can observe or interleave with its middle.  The
library reference states it ("Deques support thread-safe, memory efficient
appends and pops from either side").  So, with the GIL:

* ``push`` is ``items.append(x)`` (bottom = right end), ``pop`` is
  ``items.pop()`` (LIFO) and ``steal`` is ``items.popleft()`` (FIFO).
* The last-item race is decided by the GIL: of an owner ``pop`` and a thief
  ``popleft`` on a one-item deque, whichever C call runs first takes it and the
  other raises ``IndexError``, which becomes ``None`` / ``Steal.EMPTY``.  A
  ``len`` or truth test before the call is only a hint that spares the cost of
  the exception on an empty deque; correctness never depends on it.
* Exactly-once follows: every item enters by one ``append`` and leaves by one
  ``pop`` or ``popleft``, each atomic.  Nothing else is relied on -- no
  ordering of plain attribute stores, no bytecode-level atomicity of Python
  statements -- and ``RETRY`` is never reported (there is no CAS to lose).

The owner's fast path is therefore one ownership check (``get_ident`` against
the recorded owner) and one C call: 0.2-0.3x the cost of the same operations
on a ``collections.deque`` guarded by a ``threading.Lock`` (``concur bench
deque`` prints the ratio).  The owner's end is cheap and thieves pay nothing
extra either; what Chase--Lev buys natively (no lock on the owner's path) the
GIL gives for free.

On a free-threaded build (``sys._is_gil_enabled()`` false) there is no GIL
to serialise the C calls.  CPython 3.13t does guard ``deque`` methods with
per-object critical sections, but this module does not rely on a guarantee it
cannot test: ``WorkStealingDeque`` becomes ``_LockedWorkStealingDeque``, in
which every operation holds one ``threading.Lock``; thieves take it without
blocking and report ``RETRY`` when it is busy (a lost CAS).  The locked
variant can be chosen on any build with ``locked=True``; the tests run every
deque test on both variants.

The pool: joins, sleep, and chains deeper than one stack
--------------------------------------------------------
:class:`WorkStealingPool` gives each thread a ``_Worker``: a deque, counters
only that thread writes, and a condition it sleeps on.  The hot path -- spawn,
join, run -- takes no lock and makes no thread-local look-up:

* ``spawn`` is bound to the worker whose task received it: it checks the
  thread (one ``get_ident``), pushes a ``TaskHandle`` on that deque, counts it
  in ``spawned``, and wakes an idle worker only if one is idle.
* ``result()`` on a handle the same thread spawned (the usual fork/join shape)
  pops its own deque, whose newest task is nearly always the one awaited, and
  runs it inline (work-first, as Cilk).  Otherwise it helps: own deque, then
  steals, then sleeps until the handle is done or work appears.
* Finishing a task sets ``_done``, counts it in ``finished`` and takes the
  lock only if somebody sleeps on that very handle (``_waiters``) or the run
  is draining.  "Every spawned task finished" is read as
  ``sum(finished) == sum(spawned)``, all ``finished`` first: both only grow
  and a task is spawned before it finishes, so equal sums prove a moment with
  nothing pending.

Sleeping is Dekker-style and needs sequential consistency (the GIL gives it):
a worker going idle adds itself to ``_idle`` under the lock and *then* looks
at every deque; a spawner pushes and *then* reads ``_idle``.  One of them sees
the other, so no task is left with everyone asleep.  A push wakes one idle
worker (its own condition, so no herd), and only when one is idle: with every
worker busy a spawn costs no lock at all, which is why the cost per task does
not grow with the number of workers.  A thief that loses a race (``RETRY``)
and finds nothing calls ``time.sleep(0)``: the winner may be a thread the GIL
switched out while it holds the victim's lock, and spinning would keep it out
until the next forced switch (5 ms).

Depth.  A join that runs the joined task inline nests a Python call (4 frames
a level).  The Python recursion limit is per thread, so a thread runs at most
``INLINE_DEPTH`` = 50 nested tasks; at that depth a join *parks* instead
(sleeps without running tasks), first waking an idle worker or starting a
relief thread, which steals the awaited work from the parked thread's deque
and carries the chain another 50 levels.  A chain of D nested joins holds
about D/50 threads (1,000 deep: 21 threads, 0.01-0.04 s; 20,000 deep: about
400 threads, under 1 s) and no RecursionError; relief threads are joined by ``run`` like
the others and appear in ``stats`` after the ``workers`` entries.  The only
limit left is how many threads the OS grants; when it refuses one, the join
raises ``RuntimeError`` saying so.

Worked example (``concur bench deque``, ``fib(20)``, 10,946 tasks that do
nothing else): 1.1-1.3 µs per task with 1, 2, 4 or 8 workers alike, against
2.2-2.6 µs, growing with workers, before this design (a lock on every spawn
and finish, every sleeper woken by every finish, a 50 ms polling sleep); a
plain recursive call costs 0.07 µs, a ``ThreadPoolExecutor`` submit+result
11 µs.  A run also pays a fixed 0.1-0.2 ms per extra worker to start and join
its threads, several ms on a loaded machine.

Consequences
------------
* Correct under any interleaving the GIL allows: every pushed item is popped
  or stolen exactly once (tested with ``sys.setswitchinterval(1e-6)``, for the
  atomic and the locked variant), and
  every spawned task runs exactly once, also when joins park (tested with
  ``INLINE_DEPTH`` lowered to 2).
* No parallel speed-up under the GIL: only one thread runs Python at a time,
  so :class:`WorkStealingPool` is a correctness reference and a steal-count and
  space-bound demonstrator.  ``concur bench deque`` measures it next to
  ``multiprocessing`` and a native C locality measurement.

Non-goals
---------
* Batch steals (crossbeam ``steal_batch``), a global injector queue, a LIFO
  slot as in Tokio/Go, or task priorities.
* Using the deque from several owner threads: ``push``/``pop`` from any thread
  but the owner raise ``RuntimeError``.  (The owner is recorded by thread ident.
  An ident is reused only after its thread has exited, so a later thread that
  inherits it can never race a live owner.)
* Threads kept between runs: each ``run`` starts and joins its own.
* ``None`` as an item (``pop`` uses it to mean empty).
"""

from __future__ import annotations

import collections
import enum
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import get_ident
from typing import Any, Generic, TypeVar, cast

__all__ = ["PoolStats", "Steal", "TaskHandle", "WorkStealingDeque", "WorkStealingPool"]

T = TypeVar("T")

_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


class Steal(enum.Enum):
    """Outcome of :meth:`WorkStealingDeque.steal`: a lost race is an outcome, not an error."""

    EMPTY = "empty"  #: nothing to steal right now
    SUCCESS = "success"  #: the item was taken
    RETRY = "retry"  #: lost a race with another thief or the owner; try again


class WorkStealingDeque(Generic[T]):
    """A work-stealing deque: one owner thread pushes/pops at the bottom, any thread steals at the top.

    The owner is the first thread that calls :meth:`push` or :meth:`pop`. Invariant:
    every pushed item is returned exactly once, by ``pop`` or by a successful
    ``steal``. With the GIL each operation is one atomic ``collections.deque`` call;
    without it (or with ``locked=True``) every operation takes one lock (see the
    module essay). ``locked=None`` (default) chooses by the interpreter.

    >>> d = WorkStealingDeque()
    >>> for i in (1, 2, 3): d.push(i)
    >>> d.pop(), d.steal()
    (3, (<Steal.SUCCESS: 'success'>, 1))
    >>> d.pop(), d.pop()
    (2, None)
    """

    __slots__ = ("_items", "_lock", "_owner")

    def __new__(cls, *, locked: bool | None = None) -> WorkStealingDeque[T]:
        if cls is WorkStealingDeque and (locked or (locked is None and not _GIL)):
            cls = _LockedWorkStealingDeque
        return object.__new__(cls)

    def __init__(self, *, locked: bool | None = None) -> None:
        # Items oldest (top, stolen first) to newest (bottom, popped first). No maxlen:
        # an append never drops (and frees) an item, so no Python code runs inside it.
        self._items: collections.deque[T] = collections.deque()
        # Serialises every operation in the locked variant; unused with the GIL.
        self._lock = threading.Lock()
        self._owner: int | None = None

    @property
    def locked(self) -> bool:
        """True when every operation takes a lock (the variant for free-threaded builds)."""
        return False

    # -- owner side ---------------------------------------------------------
    def _claim(self) -> None:
        """Record the calling thread as the owner, or refuse a second one."""
        me = get_ident()
        if self._owner is None:
            self._owner = me
        elif self._owner != me:
            raise RuntimeError(
                "WorkStealingDeque.push/pop called from a thread that does not own the deque "
                f"(owner ident {self._owner}, caller {me}); other threads must use steal()"
            )

    def push(self, item: T) -> None:
        """Add ``item`` at the bottom (owner only; never blocks).

        Raises ``ValueError`` for ``None`` and ``RuntimeError`` from a non-owner thread.
        """
        if item is None:
            raise ValueError("WorkStealingDeque cannot hold None: pop() returns None to mean empty")
        if self._owner != get_ident():
            self._claim()
        self._items.append(item)

    def pop(self) -> T | None:
        """Remove and return the newest item (LIFO), or ``None`` when empty (owner only)."""
        if self._owner != get_ident():
            self._claim()
        items = self._items
        if items:  # a hint only: a thief may take the last item before the pop
            try:
                return items.pop()
            except IndexError:
                return None
        return None

    def _push_owned(self, item: T) -> None:
        """``push`` for a caller that is the owner (the pool checks once per spawn)."""
        self._items.append(item)

    def _pop_owned(self) -> T | None:
        """``pop`` for a caller that is the owner."""
        items = self._items
        if items:
            try:
                return items.pop()
            except IndexError:  # a thief took the last item since the check
                return None
        return None

    # -- thief side ---------------------------------------------------------
    def steal(self) -> tuple[Steal, T | None]:
        """Try to take the oldest item (FIFO); any thread, never blocks.

        Returns ``(Steal.SUCCESS, item)``, ``(Steal.EMPTY, None)`` or
        ``(Steal.RETRY, None)`` when it lost a race (retrying may succeed; only the
        locked variant reports it).
        """
        items = self._items
        if items:
            try:
                return Steal.SUCCESS, items.popleft()
            except IndexError:  # the owner or another thief took the last item
                pass
        return Steal.EMPTY, None

    def __len__(self) -> int:
        """Number of items (exact when no operation is in flight)."""
        return len(self._items)

    def is_empty(self) -> bool:
        """Emptiness (exact when no operation is in flight)."""
        return not self._items


class _LockedWorkStealingDeque(WorkStealingDeque[T]):
    """The same deque with every operation under ``_lock``: for builds without a GIL.

    Thieves take the lock without blocking and report ``RETRY`` when it is busy (the
    outcome of a lost compare-and-set in Chase--Lev), so a thief never waits on the
    owner; the owner blocks only for the few bytecodes a thief holds it.
    """

    __slots__ = ()

    @property
    def locked(self) -> bool:
        return True

    def push(self, item: T) -> None:
        if item is None:
            raise ValueError("WorkStealingDeque cannot hold None: pop() returns None to mean empty")
        if self._owner != get_ident():
            self._claim()
        with self._lock:
            self._items.append(item)

    def pop(self) -> T | None:
        if self._owner != get_ident():
            self._claim()
        return self._pop_owned()

    def _push_owned(self, item: T) -> None:
        with self._lock:
            self._items.append(item)

    def _pop_owned(self) -> T | None:
        with self._lock:
            items = self._items
            return items.pop() if items else None

    def steal(self) -> tuple[Steal, T | None]:
        if not self._lock.acquire(blocking=False):
            return Steal.RETRY, None
        try:
            items = self._items
            if items:
                return Steal.SUCCESS, items.popleft()
            return Steal.EMPTY, None
        finally:
            self._lock.release()


# ---------------------------------------------------------------------------
# The pool

# Tasks one thread runs nested inside one another (a join that runs the joined task
# inline, or helps with another) before it hands the rest of a chain to another
# thread.  Each level costs 4 Python frames plus the task's own, so 50 levels stay
# far below the default recursion limit of 1,000 with room for the tasks' own calls.
INLINE_DEPTH = 50


class TaskHandle(Generic[T]):
    """A spawned task.  ``result()`` waits for it by running other tasks meanwhile."""

    __slots__ = ("_args", "_done", "_error", "_fn", "_owner", "_retrieved", "_value", "_waiters")

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...], owner: _Worker) -> None:
        self._fn = fn
        self._args = args
        self._owner = owner  # the worker whose deque it was pushed on
        self._done = False
        self._value: T | None = None  # fn's return value once _done without _error
        self._error: BaseException | None = None
        self._retrieved = False
        # Conditions of the threads sleeping until this task is done; None until one
        # sleeps.  Changed under the pool's lock; read without it after _done is set.
        self._waiters: list[threading.Condition] | None = None

    def done(self) -> bool:
        """True once the task has finished (returned or raised)."""
        return self._done

    def result(self) -> T:
        """The task's return value; re-raises its exception.

        Called inside a task of the same pool, it runs other tasks (its own deque
        first, then steals) until this one is done, so nested waits never deadlock
        and need no Python recursion beyond ``INLINE_DEPTH`` levels per thread.
        Called from another thread it simply blocks.  Raises ``RuntimeError`` if
        the pool's run ended without running the task.
        """
        if not self._done:
            self._owner.pool._join(self)
        self._retrieved = True
        if self._error is not None:
            raise self._error
        return cast(T, self._value)  # done without an error: _value holds fn's return value


@dataclass
class PoolStats:
    """What the last :meth:`WorkStealingPool.run` did, per thread.

    Index 0 is the caller of ``run``, 1 .. workers-1 the pool's threads, and any
    further entries the relief threads started for joins nested deeper than
    ``INLINE_DEPTH`` (see the module essay).
    """

    tasks: list[int] = field(default_factory=list)
    steals: list[int] = field(default_factory=list)
    steal_retries: list[int] = field(default_factory=list)
    max_deque: list[int] = field(default_factory=list)


class _Worker:
    """One thread's share of a run: its deque, counters and the condition it sleeps on.

    ``spawned`` and ``finished`` are written only by this worker's thread (tasks
    pushed on its deque, tasks it ran); the caller of ``run`` sums them to see
    whether every spawned task has finished.
    """

    __slots__ = (
        "depth",
        "deque",
        "finished",
        "ident",
        "index",
        "max_deque",
        "pool",
        "retries",
        "rng",
        "spawn",
        "spawned",
        "steals",
        "tasks",
        "wake",
    )

    def __init__(self, pool: WorkStealingPool, index: int, seed: int | None) -> None:
        self.pool = pool
        self.index = index
        self.deque: WorkStealingDeque[TaskHandle[Any]] = WorkStealingDeque()
        self.rng = random.Random(None if seed is None else seed + index)
        self.ident: int | None = None  # the thread serving this worker, while the run lasts
        self.depth = 0  # tasks running nested on this thread's stack
        self.wake = threading.Condition(pool._lock)  # this thread sleeps on it; see the pool's lock
        self.spawn = self._spawn  # bound once: handed to every task this worker runs
        self.spawned = self.finished = self.tasks = self.steals = self.retries = self.max_deque = 0

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> TaskHandle[Any]:
        """Push ``fn(spawn, *args)`` on this worker's deque; only from the thread running its task."""
        if threading.get_ident() != self.ident:
            raise RuntimeError(
                "spawn() must be called by the task it was given to, on that task's thread, while the "
                "WorkStealingPool runs; pass data to child tasks, not a parent's spawn"
            )
        handle = TaskHandle(fn, args, self)
        self.spawned += 1
        d = self.deque
        d._push_owned(handle)
        size = len(d._items)
        if size > self.max_deque:
            self.max_deque = size
        if self.pool._idle:  # read after the push: a thread going idle either sees it or is in _idle
            self.pool._wake_one()
        return handle


class WorkStealingPool:
    """A fork/join pool: ``run(fn, *args)`` calls ``fn(spawn, *args)`` on ``workers`` threads.

    ``spawn(g, *a)`` pushes the task ``g(spawn, *a)`` on the calling worker's
    deque and returns a :class:`TaskHandle`.  The calling thread of ``run`` is
    worker 0; ``workers - 1`` threads are started per run and joined before it
    returns.  ``run`` returns the root's result or raises its exception; if the
    root succeeded but a task whose result nobody retrieved raised, the first
    such exception is raised.  ``run`` waits for every spawned task.  Joins may
    nest to any depth: past ``INLINE_DEPTH`` levels on one thread the chain
    continues on another (a relief thread, started when no idle one exists).

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
        # Guards the sleeping side of a run: _idle, _running, _stop, _draining,
        # every handle's _waiters, and growth of _ws/_threads.  Each worker's
        # ``wake`` condition and every external waiter's condition share it.  The
        # hot path (spawn, pop, run a task) never takes it.
        self._lock = threading.Lock()
        self._running = False
        self._local = threading.local()  # .worker: the _Worker served by this thread
        self._ws: list[_Worker] = []
        self._threads: list[threading.Thread] = []
        self._idle: set[_Worker] = set()  # sleeping workers a new task may wake
        self._stop = False  # the run is over: every thread returns
        self._draining = False  # the root is done; worker 0 waits for the stragglers
        self._failed: list[TaskHandle[Any]] = []
        self._outside: set[threading.Condition] = set()  # conditions of non-worker threads in result()

    # -- public -------------------------------------------------------------
    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(spawn, *args)`` to completion with work stealing; see the class doc."""
        with self._lock:
            if self._running:
                raise RuntimeError("WorkStealingPool.run is already running; one run at a time per pool")
            self._running = True
            self._stop = self._draining = False
            self._idle.clear()
            self._failed = []
            self._ws = [_Worker(self, i, self._seed) for i in range(self.workers)]
            self._threads = [self._thread_for(w) for w in self._ws[1:]]
        me = self._ws[0]
        me.ident = threading.get_ident()
        self._local.worker = me
        root = TaskHandle(fn, args, me)
        me.spawned = 1
        me.deque._push_owned(root)
        try:
            for th in list(self._threads):
                th.start()
            self._join(root)
            self._drain(me)
        finally:
            with self._lock:
                self._stop = True
                for w in self._ws:
                    w.wake.notify()
                for cond in self._outside:
                    cond.notify()
                threads = list(self._threads)
            for th in threads:
                if th.ident is not None:  # started
                    th.join()
            for w in self._ws:
                w.ident = None  # a spawn kept past the run now raises
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
        return cast(T, root._value)  # the root finished without an error: its value is fn's

    # -- internals ----------------------------------------------------------
    def _thread_for(self, w: _Worker) -> threading.Thread:
        return threading.Thread(target=self._worker_main, args=(w,), name=f"ws-worker-{w.index}")

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> TaskHandle[Any]:
        """``spawn`` for the calling thread's current task; RuntimeError outside a run."""
        worker: _Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            raise RuntimeError("spawn() must be called from inside a task of a running WorkStealingPool")
        return worker._spawn(fn, *args)

    def _execute(self, me: _Worker, task: TaskHandle[Any]) -> None:
        """Run ``task`` on ``me``'s thread, record the outcome, wake whoever waits for it."""
        me.tasks += 1
        me.depth += 1
        try:
            task._value = task._fn(me.spawn, *task._args)
        except BaseException as exc:  # stored and re-raised by result(); the worker survives
            task._error = exc
            self._failed.append(task)  # list.append is atomic; read only after the run
        finally:
            me.depth -= 1
        task._done = True
        me.finished += 1
        # Both flags are read after the writes above: a sleeper registers under the
        # lock and then re-checks _done (or the counts), so one side always sees the other.
        if task._waiters is not None or self._draining:
            with self._lock:
                for cond in task._waiters or ():
                    cond.notify()
                if self._draining:
                    self._ws[0].wake.notify()

    def _find_task(self, me: _Worker) -> TaskHandle[Any] | None:
        """Own deque first (LIFO), then steal from random victims (FIFO)."""
        task = me.deque._pop_owned()
        if task is not None:
            return task
        ws = self._ws
        n = len(ws)
        if n == 1:
            return None
        lost = False
        for _ in range(2 * n):
            victim = ws[me.rng.randrange(n)]
            if victim is me:
                continue
            outcome, task = victim.deque.steal()
            if outcome is Steal.SUCCESS:
                me.steals += 1
                return task
            if outcome is Steal.RETRY:
                me.retries += 1
                lost = True
        if lost:
            # The winner of that race may be a thread the GIL has just switched out while it
            # holds the victim's lock: give it the GIL now instead of spinning until the next
            # forced switch (5 ms by default).
            time.sleep(0)
        return None

    def _any_work(self) -> bool:
        return any(w.deque._items for w in self._ws)

    def _wake_one(self) -> None:
        """Wake one idle worker, if any is still idle, to look for the task just pushed."""
        with self._lock:
            if self._idle:
                self._idle.pop().wake.notify()

    def _sleep(self, me: _Worker, ready: Callable[[], bool], park: bool) -> None:
        """Sleep on ``me.wake`` until ``ready()``, the run's end or (unless parked) visible work.

        An idle worker is in ``_idle`` while it sleeps so that a push wakes it; a
        parked one is not (it may not run tasks) and, before sleeping, makes sure
        another thread can take its deque: it wakes an idle worker or starts a relief
        thread.  Caller holds ``_lock``.
        """
        if park and not self._stop:
            if self._idle:
                self._idle.pop().wake.notify()
            else:
                w = _Worker(self, len(self._ws), self._seed)
                th = self._thread_for(w)
                try:
                    th.start()
                except RuntimeError as exc:  # the OS refused another thread
                    raise RuntimeError(
                        f"WorkStealingPool: joins nested {me.depth} deep on each of {len(self._ws)} threads; "
                        f"continuing the chain needs another thread and none could be started ({exc})"
                    ) from exc
                self._ws.append(w)
                self._threads.append(th)
        while not (ready() or self._stop or (not park and self._any_work())):
            if not park:
                self._idle.add(me)
            me.wake.wait()
            self._idle.discard(me)

    def _join(self, handle: TaskHandle[Any]) -> None:
        """Wait for ``handle``: run tasks meanwhile on a worker thread, block on any other."""
        me = handle._owner
        if me.ident != threading.get_ident():
            current: _Worker | None = getattr(self._local, "worker", None)  # joining a handle it did not spawn
            if current is None or current.ident != threading.get_ident():
                self._join_outside(handle)
                return
            me = current
        while not handle._done:
            park = me.depth >= INLINE_DEPTH
            task = None
            if not park:  # usually the newest task on our own deque is the very one awaited
                task = me.deque._pop_owned()
                if task is None:
                    task = self._find_task(me)
            if task is not None:
                self._execute(me, task)
                continue
            with self._lock:
                if handle._waiters is None:
                    handle._waiters = []
                handle._waiters.append(me.wake)
                try:
                    self._sleep(me, handle.done, park)
                finally:
                    handle._waiters.remove(me.wake)
            if self._stop and not handle._done:
                raise RuntimeError("TaskHandle.result(): the pool stopped before this task finished")

    def _join_outside(self, handle: TaskHandle[Any]) -> None:
        """``result()`` from a thread that is not one of this run's workers: block."""
        with self._lock:
            cond = threading.Condition(self._lock)  # notified when handle is done or the run ends
            if handle._waiters is None:
                handle._waiters = []
            handle._waiters.append(cond)
            self._outside.add(cond)
            try:
                while not handle._done and self._running and not self._stop:
                    cond.wait()
            finally:
                handle._waiters.remove(cond)
                self._outside.discard(cond)
        if not handle._done:
            raise RuntimeError("TaskHandle.result(): the pool's run ended before this task ran")

    def _quiescent(self) -> bool:
        """Every spawned task has finished.  Reads all ``finished`` before any ``spawned``:
        both only grow and a task is spawned before it finishes, so equal sums mean that
        at the moment between the two passes nothing was pending (and nothing can spawn)."""
        finished = sum(w.finished for w in self._ws)
        return finished == sum(w.spawned for w in self._ws)

    def _drain(self, me: _Worker) -> None:
        """Worker 0, root done: help until every spawned task has finished."""
        while not self._quiescent():
            task = self._find_task(me)
            if task is not None:
                self._execute(me, task)
                continue
            with self._lock:
                self._draining = True
                self._sleep(me, self._quiescent, park=False)

    def _worker_main(self, me: _Worker) -> None:
        me.ident = threading.get_ident()
        self._local.worker = me
        while not self._stop:
            task = self._find_task(me)
            if task is not None:
                self._execute(me, task)
                continue
            with self._lock:
                self._sleep(me, lambda: False, park=False)
