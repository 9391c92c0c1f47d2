"""Sharded (striped) counter: many writers, rare readers.

How is this designed, and why?
==============================

The problem (what JDK ``LongAdder``/``Striped64`` solves)
---------------------------------------------------------
A counter that many threads bump -- requests served, bytes sent -- is correct
with one shared atomic ``fetch_add``, but every increment must own the cache
line holding the counter.  On a multi-core CPU that line moves from core to
core; one transfer costs tens of nanoseconds (more across sockets), so the
whole machine sustains about ``1 / t_transfer`` increments per second *whatever
the thread count*: with ``t_transfer`` = 50 ns that is 20 M increments/s, flat
from 2 threads to 64.

``LongAdder`` spreads the increments over *cells*.  A thread hashes to a cell
and adds there; contended cells make the table grow up to the next power of
two >= NCPU.  Each cell is padded (``@Contended``, 128 B by default in HotSpot)
so that two cells never share a cache line -- or, on x86-64 since Sandy Bridge,
an adjacent pair of 64 B lines that the spatial prefetcher pulls together.
Without padding, cells 8 B apart are *false sharing*: logically private,
physically one line, and as slow as the shared atomic.

Increments need only **relaxed** ordering: the counter publishes no other
data, so atomicity (no lost update) is all that is required, and the order in
which other memory becomes visible does not matter.  On x86-64 relaxed and
sequentially consistent ``fetch_add`` compile to the same ``lock xadd``; on
AArch64 relaxed saves the acquire/release half of ``ldaddal``.  The dominant
cost is moving the line, not the fence.

Reading sums every cell: with S cells it costs S loads, each a probable miss
(``S * t_miss``).  So sharding pays when writes are many and reads rare:
write rate W, read rate R, shard when
``W * (t_contended - t_local) > R * S * t_miss``.
Worked example: S = 16, t_miss = 80 ns, t_contended = 50 ns, t_local = 3 ns
gives W/R > 16 * 80 / 47 ~= 27 -- shard a write-heavy metric, keep a read-mostly
value in one atomic.  Memory: 16 cells * 128 B = 2 KiB instead of 8 B
(1 KiB with 64 B padding, which leaves adjacent-line prefetch interference).
The pack ``formulas/sharded_counter.yaml`` holds these relations.

What this Python version does
-----------------------------
State: one *cell* per thread that ever called :meth:`ShardedCounter.add`
(reached through a ``threading.local``, the cheapest per-thread key CPython
offers -- there is no per-CPU id), a registry list of all cells, and an int
``_base``.  The value is ``_base + sum(cell.value for cell in cells)``.

* ``add(n)``: the calling thread finds its own cell and does
  ``cell.value += n``.  **Only the owning thread ever writes a cell**, so the
  read-modify-write has no competitor and no increment can be lost, even if
  the interpreter switches threads between the load and the store.  No lock is
  taken on this path.  The first ``add`` of a thread creates its cell and
  appends it to the registry under ``_registry_lock`` (once per thread).
* ``value()``: takes ``_registry_lock`` (so the cell list and ``_base`` are
  read together), then sums.  Each cell load returns some value that cell
  held; adds that complete during the sum may or may not be counted.  **It is
  not an atomic snapshot**, exactly like ``LongAdder.sum()``: it is exact
  when no add runs concurrently (e.g. after the writers are joined), and with
  only positive increments successive reads by one thread never decrease.
* ``reset()``: never writes another thread's cell (that would make it a
  second writer and could lose increments).  It subtracts the current sum
  from ``_base`` under the lock and returns what it removed
  (``sumThenReset``).  Every add is counted exactly once: either in the
  amount a reset returned or in later values.
* Cells of threads that have exited are folded into ``_base`` and dropped
  when a new thread registers, so memory stays proportional to the threads
  alive, not to the threads ever seen.  A dead thread cannot write again, so
  folding is race-free.

Why this is race-free:

* Under the GIL each bytecode runs atomically; a cell's ``value`` attribute is
  replaced by a store of a new int object, which a reader sees either before
  or after.  Single writer per cell means the ``+=`` window has no rival.
* Under free-threaded CPython (3.13t/3.14t) the argument is the same single-
  writer argument; what it additionally needs is that a load of an attribute
  racing a store of that attribute returns either the old or the new object
  and never crashes, which free-threaded CPython aims to provide for
  ``__slots__`` attributes.  This module has **not** been tested on a
  free-threaded build (none is packaged for the project's CI, Debian 12).

Consequences
------------
* In CPython the cells are Python objects scattered on the heap; their
  placement in cache lines is the allocator's business, and every add also
  touches the thread-local dict, refcounts and the int cache.  Padding cannot
  be expressed and would not be what limits speed.
* Under the GIL threads never run Python bytecode in parallel, so sharding
  buys **no parallel speed-up** here; it removes the lock cost (roughly 50 ns
  per add instead of 250 ns with a lock on a 2-vCPU EPYC VM).  The hardware
  effects -- one line's transfer rate, false sharing, relaxed vs seq_cst --
  are measured by native C in ``concur.native`` (``concur bench counter``).

Non-goals
---------
* An atomic snapshot or a compare-and-set on the total (use
  :class:`LockedCounter` when a read must be linearizable).
* Cross-process counting (each process has its own counter; sum them
  yourself, as ``concur bench counter`` does with ``multiprocessing``).
* Bounded approximate reads in the style of Linux ``percpu_counter``: reads
  here are always the full sum.
"""

from __future__ import annotations

import threading

__all__ = ["LockedCounter", "ShardedCounter"]


class _Cell:
    """One thread's private share of a counter: written only by its owner thread."""

    __slots__ = ("owner", "value")

    def __init__(self, owner: threading.Thread) -> None:
        self.value = 0
        self.owner = owner


class ShardedCounter:
    """An integer counter with one private cell per writing thread.

    ``add`` is lock-free after a thread's first call; ``value`` sums the cells
    and is not an atomic snapshot while adds run concurrently (exact once they
    have finished).  Safe to share between any number of threads.

    >>> c = ShardedCounter()
    >>> c.add(); c.add(41)
    >>> c.value()
    42
    >>> c.reset()
    42
    >>> c.value()
    0
    """

    __slots__ = ("_base", "_cells", "_local", "_registry_lock")

    def __init__(self) -> None:
        self._local = threading.local()
        # Guards _cells (the registry of live cells) and _base (the folded-in
        # total of dead threads' cells minus everything reset() removed).
        # Never taken by add() after a thread's first call.
        self._registry_lock = threading.Lock()
        self._cells: list[_Cell] = []
        self._base = 0

    def add(self, n: int = 1) -> None:
        """Add ``n`` (any int, may be negative) to the counter; never blocks after the first call per thread."""
        try:
            cell = self._local.cell
        except AttributeError:
            cell = self._register()
        cell.value += n

    def _register(self) -> _Cell:
        """Create the calling thread's cell; folds exited threads' cells into ``_base``."""
        cell = _Cell(threading.current_thread())
        with self._registry_lock:
            live = []
            for old in self._cells:
                if old.owner.is_alive():
                    live.append(old)
                else:
                    # The owner has exited: it can never write this cell again.
                    self._base += old.value
            live.append(cell)
            self._cells = live
        self._local.cell = cell
        return cell

    def value(self) -> int:
        """The sum of all adds so far.

        Not an atomic snapshot: an add running concurrently may or may not be
        included.  Exact when no add is in flight.  Costs one load per thread
        that has ever added and is still alive.
        """
        with self._registry_lock:
            return self._base + sum(cell.value for cell in self._cells)

    def reset(self) -> int:
        """Set the counter to zero and return the total removed (``sumThenReset``).

        Not atomic with concurrent adds: each such add is counted either in the
        returned amount or in later values, never in both and never lost.
        """
        with self._registry_lock:
            total = self._base + sum(cell.value for cell in self._cells)
            self._base -= total
            return total

    def __repr__(self) -> str:
        return f"ShardedCounter(value={self.value()})"


class LockedCounter:
    """The plain alternative: one int under one lock.

    Every ``add`` takes the lock; ``value`` is linearizable (an exact snapshot).

    >>> c = LockedCounter()
    >>> c.add(3)
    >>> c.value()
    3
    """

    __slots__ = ("_lock", "_value")

    def __init__(self) -> None:
        # Guards _value: every read and read-modify-write of it.
        self._lock = threading.Lock()
        self._value = 0

    def add(self, n: int = 1) -> None:
        """Add ``n`` to the counter; blocks while another thread holds the lock."""
        with self._lock:
            self._value += n

    def value(self) -> int:
        """The exact current total (a linearizable read)."""
        with self._lock:
            return self._value

    def reset(self) -> int:
        """Set the counter to zero atomically and return the total removed."""
        with self._lock:
            total = self._value
            self._value = 0
            return total

    def __repr__(self) -> str:
        return f"LockedCounter(value={self.value()})"
