"""``concur bench deque``: work stealing in CPython, next to processes and native C.

Tables (median and spread, min-max, of ``--runs`` runs):

0. The owner's path: push then pop by the owner, ns per pair, on a
   :class:`WorkStealingDeque` and on its peer, a ``collections.deque`` behind a
   ``threading.Lock``; with no thieves and with 3 threads stealing meanwhile.
1. Space: the same task tree run through a :class:`WorkStealingDeque` by its
   owner (LIFO pops) and by a thief (FIFO steals): peak length, against the
   bounds ``depth*(b-1)+1`` and ``b**depth`` of ``formulas/work_stealing.yaml``.
2. :class:`WorkStealingPool` summing squares of ``range(N)`` by binary splitting
   into leaves, with 1..N workers and two switch intervals: wall time, speed-up
   over one worker, steals per worker.  Under the GIL the speed-up stays <= 1.
3. Per-task overhead: ``fib(spawn, n)`` with empty leaves (``--fib``; 10,946 tasks
   at n = 20), so nearly all the time is the pool's.  With 1..N workers (worker
   counts interleaved, best of ``--runs``): the fixed cost of a run (an empty root:
   starting and joining ``workers - 1`` threads), the cost per task once that is
   taken off, and its ratio to one worker; against the floor (the same recursion as plain calls)
   and the peer users would pick for many small tasks,
   ``concurrent.futures.ThreadPoolExecutor`` (the same number of empty tasks,
   ``submit`` then ``result()`` each; it cannot run the nested joins themselves:
   a worker blocked in ``result()`` holds its thread, and the tree deadlocks once
   every worker waits).
4. The same job split into equal chunks over ``multiprocessing`` processes:
   the speed-up the hardware allows.
5. Native C (``--native``): the tree run LIFO vs FIFO over arrays larger and
   smaller than the caches: time and peak deque length.
"""

from __future__ import annotations

import collections
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from concur.bench.counter import (
    core_count,
    markdown_table,
    median_spread,
    spread,
    thread_counts,
)

if TYPE_CHECKING:
    from concur.primitives.ws_deque import TaskHandle

__all__ = ["command", "fib_task", "sum_squares_task", "tree_peak_lengths"]


def sum_squares_task(spawn: Callable[..., TaskHandle[int]], lo: int, hi: int, leaf: int) -> int:
    """Sum of i*i over [lo, hi): spawn the right half, recurse into the left, join."""
    if hi - lo <= leaf:
        return sum(i * i for i in range(lo, hi))
    mid = (lo + hi) // 2
    right = spawn(sum_squares_task, mid, hi, leaf)
    return sum_squares_task(spawn, lo, mid, leaf) + right.result()


def fib_task(spawn: Callable[..., TaskHandle[int]], n: int) -> int:
    """Fibonacci by spawning ``n - 1`` and computing ``n - 2`` inline: fib(n+1) tasks, no other work."""
    if n < 2:
        return n
    first = spawn(fib_task, n - 1)
    return fib_task(spawn, n - 2) + first.result()


def _plain_fib(n: int) -> int:
    return n if n < 2 else _plain_fib(n - 1) + _plain_fib(n - 2)


def _empty(*_: object) -> None:
    return None


def per_task_table(n: int, counts: list[int], runs: int) -> tuple[list[list[object]], str]:
    """Rows of (workers, fixed ms per run, µs/task whole run, µs/task less the fixed cost, x one worker,
    x floor, executor ÷ pool) and a summary line; best of ``runs`` interleaved runs."""
    from concurrent.futures import ThreadPoolExecutor

    from concur.primitives import WorkStealingPool

    expected = _plain_fib(n)
    tasks = 0
    per: dict[int, list[float]] = {w: [] for w in counts}
    fixed: dict[int, list[float]] = {w: [] for w in counts}
    floor: list[float] = []
    executor: list[float] = []
    WorkStealingPool(1).run(fib_task, min(n, 12))  # warm up
    for r in range(runs):  # one of each per round, so a busy moment hits all alike
        for w in counts:
            pool = WorkStealingPool(w, seed=r)
            t0 = time.perf_counter()
            pool.run(_empty)
            fixed[w].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            got = pool.run(fib_task, n)
            per[w].append(time.perf_counter() - t0)
            if got != expected:
                raise RuntimeError(f"WorkStealingPool({w}) gave fib({n}) = {got}, expected {expected}")
            tasks = sum(pool.stats.tasks)
        t0 = time.perf_counter()
        _plain_fib(n)
        floor.append((time.perf_counter() - t0) / tasks)
        with ThreadPoolExecutor(max_workers=counts[-1]) as ex:
            t0 = time.perf_counter()
            for f in [ex.submit(_empty) for _ in range(tasks)]:
                f.result()
            executor.append((time.perf_counter() - t0) / tasks)
    marginal = {w: (min(per[w]) - min(fixed[w])) / tasks for w in counts}
    one = marginal[counts[0]]
    best_floor, best_exec = min(floor), min(executor)
    rows: list[list[object]] = []
    for w in counts:
        rows.append(
            [
                w,
                f"{min(fixed[w]) * 1e3:.2f}",
                f"{min(per[w]) / tasks * 1e6:.2f}",
                f"{marginal[w] * 1e6:.2f}",
                f"{marginal[w] / one:.2f}x",
                f"{marginal[w] / best_floor:.0f}x",
                f"{best_exec / marginal[w]:.2f}x",
            ]
        )
    worst = max(marginal.values())
    summary = (
        f"{tasks:,} tasks; floor (plain recursive calls) {best_floor * 1e6:.3f} µs/task; peer "
        f"ThreadPoolExecutor({counts[-1]}) submit+result of empty tasks {best_exec * 1e6:.2f} µs/task; "
        f"slowest worker count / one worker: {worst / one:.2f}x"
    )
    return rows, summary


class LockedDeque:
    """The peer for the owner's path: a ``collections.deque`` behind a ``threading.Lock``."""

    __slots__ = ("_items", "_lock")

    def __init__(self) -> None:
        self._items: collections.deque[int] = collections.deque()
        self._lock = threading.Lock()

    def push(self, item: int) -> None:
        with self._lock:
            self._items.append(item)

    def pop(self) -> int | None:
        with self._lock:
            return self._items.pop() if self._items else None

    def steal(self) -> int | None:
        with self._lock:
            return self._items.popleft() if self._items else None


def owner_path_table(ops: int, runs: int, thief_counts: tuple[int, ...] = (0, 3)) -> tuple[list[list[object]], str]:
    """Owner push + pop (one of each, ns per pair) on a WorkStealingDeque and on the peer.

    With ``k`` thieves, ``k`` threads call ``steal`` in a loop meanwhile (they find the deque
    empty or take the item just pushed; the owner's ``pop`` then finds nothing). Best of
    ``runs`` interleaved runs; rows (thieves, concur ns, peer ns, ratio) and a summary line.
    """
    from concur.primitives import WorkStealingDeque

    def timed(make: Callable[[], Any], thieves: int) -> float:
        d = make()
        stop = threading.Event()
        started = threading.Barrier(thieves + 1)

        def thief() -> None:
            steal = d.steal
            started.wait()
            while not stop.is_set():
                steal()

        threads = [threading.Thread(target=thief) for _ in range(thieves)]
        for t in threads:
            t.start()
        started.wait()
        push, pop = d.push, d.pop
        t0 = time.perf_counter_ns()
        for i in range(1, ops + 1):
            push(i)
            pop()
        elapsed = time.perf_counter_ns() - t0
        stop.set()
        for t in threads:
            t.join()
        return elapsed / ops

    rows: list[list[object]] = []
    ratios = []
    for thieves in thief_counts:
        ours: list[float] = []
        peer: list[float] = []
        for _ in range(runs):
            ours.append(timed(WorkStealingDeque, thieves))
            peer.append(timed(LockedDeque, thieves))
        ratio = min(ours) / min(peer)
        ratios.append(ratio)
        rows.append([thieves, f"{min(ours):.0f}", f"{min(peer):.0f}", f"{ratio:.2f}x"])
    summary = (
        f"WorkStealingDeque / deque+Lock, owner push + pop, no thieves: {ratios[0]:.2f}x (target <= 1.10x); "
        f"GIL: {getattr(sys, '_is_gil_enabled', lambda: True)()}"
    )
    return rows, summary


def tree_peak_lengths(n: int, leaf: int) -> tuple[int, int, int]:
    """(tasks, peak length popping LIFO, peak length stealing FIFO) for a binary split of ``n``.

    Each task (lo, hi) wider than ``leaf`` is replaced by its two halves.
    """
    from concur.primitives import Steal, WorkStealingDeque

    peaks = []
    tasks = 0
    for lifo in (True, False):
        d: WorkStealingDeque[tuple[int, int]] = WorkStealingDeque()
        d.push((0, n))
        peak, tasks = 1, 0
        while True:
            if lifo:
                item = d.pop()
            else:
                outcome, item = d.steal()
                assert outcome is not Steal.RETRY  # single-threaded: no race to lose
            if item is None:
                break
            tasks += 1
            lo, hi = item
            if hi - lo > leaf:
                mid = (lo + hi) // 2
                d.push((mid, hi))
                d.push((lo, mid))
                peak = max(peak, len(d))
        peaks.append(peak)
    return tasks, peaks[0], peaks[1]


def _chunk(bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    return sum(i * i for i in range(lo, hi))


MAX_NATIVE_MB = 4096
"""The largest array of the C run, MiB: it is allocated whole (``--native-mb 100000`` asked for 100 GB)."""


def _sizes(text: str) -> list[int]:
    """``--native-mb``'s sizes, checked before any benchmark runs (``abc`` was a traceback after them)."""
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a list of whole numbers of MiB, e.g. 4,64,256") from None
    if not sizes or not all(1 <= s <= MAX_NATIVE_MB for s in sizes):
        raise click.BadParameter(f"{text!r}: each size must be 1 to {MAX_NATIVE_MB:,} MiB")
    return sizes


@click.command(name="deque")
@click.option("--runs", default=5, show_default=True, type=click.IntRange(1, 50), help="runs per cell")
@click.option(
    "--n", "n", default=4_000_000, show_default=True, type=click.IntRange(1000), help="sum squares of range(N)"
)
@click.option("--leaf", default=2000, show_default=True, type=click.IntRange(1), help="leaf size of the split")
@click.option("--native/--no-native", default=True, show_default=True, help="also run the C measurement")
@click.option(
    "--native-mb",
    default="4,64,256",
    show_default=True,
    callback=lambda _ctx, _param, text: _sizes(text),
    help=f"array sizes (MiB) for the C run, each 1 to {MAX_NATIVE_MB:,}",
)
@click.option("--max-workers", type=click.IntRange(1, 64), default=None, help="override the worker counts' top")
@click.option(
    "--fib",
    "fib_n",
    default=20,
    show_default=True,
    type=click.IntRange(2, 30),
    help="per-task table: fib(N) spawns fib(N+1) tasks",
)
@click.option(
    "--owner-ops",
    default=200_000,
    show_default=True,
    type=click.IntRange(1),
    help="owner push+pop pairs per timed run",
)
def command(
    runs: int,
    n: int,
    leaf: int,
    native: bool,
    native_mb: list[int],
    max_workers: int | None,
    fib_n: int,
    owner_ops: int,
) -> None:
    """Work-stealing deque and pool: space bound, GIL-bound speed-up, processes, native locality."""
    cores = core_count()
    counts = thread_counts(max_workers or cores, oversubscribe=max_workers is None)
    click.echo(
        f"cores: {cores}   python: {sys.version.split()[0]}   "
        f"GIL: {getattr(sys, '_is_gil_enabled', lambda: True)()}   workers: {counts}"
    )
    _owner_section(owner_ops, runs)
    _space_section(n, leaf)
    expected = sum(i * i for i in range(n))
    _pool_section(n, leaf, runs, counts, expected)
    _per_task_section(fib_n, counts, runs)
    _process_section(n, runs, cores, expected)
    if native:
        _native_section(native_mb, runs)


def _owner_section(owner_ops: int, runs: int) -> None:
    """The owner's push + pop against a locked ``collections.deque``, with and without thieves."""
    click.echo(
        f"\n## Owner push + pop: WorkStealingDeque against collections.deque + threading.Lock; "
        f"ns per pair, best of {runs} interleaved runs of {owner_ops:,}\n"
    )
    rows, summary = owner_path_table(owner_ops, runs)
    click.echo(markdown_table(["thieves stealing", "WorkStealingDeque", "deque + Lock", "ratio"], rows))
    click.echo(f"\n{summary}")


def _space_section(n: int, leaf: int) -> None:
    """Peak deque length of a binary split, owner LIFO against FIFO (the space bound)."""
    tasks, lifo_peak, fifo_peak = tree_peak_lengths(n, leaf)
    click.echo(f"\n## Space: binary split of {n:,} into leaves of <= {leaf:,}\n")
    click.echo(
        markdown_table(
            ["tasks", "peak deque, owner LIFO", "peak deque, FIFO"], [[f"{tasks:,}", lifo_peak, f"{fifo_peak:,}"]]
        )
    )


def _pool_section(n: int, leaf: int, runs: int, counts: list[int], expected: int) -> None:
    """WorkStealingPool's sum of squares at two GIL switch intervals: seconds, speed-up, steals."""
    from concur.primitives import WorkStealingPool

    click.echo(
        f"\n## WorkStealingPool: sum of squares of range({n:,}), leaves {leaf:,}; "
        f"seconds, median (min-max) of {runs} runs\n"
    )
    old = sys.getswitchinterval()
    rows = []
    try:
        for interval in (0.005, 1e-4):
            sys.setswitchinterval(interval)
            base = None
            WorkStealingPool(1).run(sum_squares_task, 0, n, leaf)  # warm up
            for w in counts:
                times: list[float] = []
                steals: list[int] = []
                for _ in range(runs):
                    pool = WorkStealingPool(w, seed=len(times))
                    t0 = time.perf_counter()
                    got = pool.run(sum_squares_task, 0, n, leaf)
                    times.append(time.perf_counter() - t0)
                    if got != expected:
                        raise RuntimeError(f"WorkStealingPool({w}) summed {got}, expected {expected}")
                    steals.extend(pool.stats.steals)
                med = statistics.median(times)
                base = base or med
                rows.append(
                    [
                        f"{interval:g} s",
                        w,
                        median_spread(times, "{:.3f}"),
                        f"{base / med:.2f}x",
                        f"{min(steals)}-{max(steals)}",
                    ]
                )
    finally:
        sys.setswitchinterval(old)
    click.echo(markdown_table(["switch interval", "workers", "seconds", "speed-up", "steals per worker"], rows))


def _per_task_section(fib_n: int, counts: list[int], runs: int) -> None:
    """Per-task overhead on fib with empty leaves, against ThreadPoolExecutor."""
    click.echo(
        f"\n## Per-task overhead: fib({fib_n}) with empty leaves; best of {runs} interleaved runs; "
        "the peer is ThreadPoolExecutor\n"
    )
    rows, summary = per_task_table(fib_n, counts, runs)
    click.echo(
        markdown_table(
            [
                "workers",
                "fixed ms/run",
                "µs/task, whole run",
                "µs/task less fixed",
                "x 1 worker",
                "x floor",
                "ThreadPoolExecutor / pool",
            ],
            rows,
        )
    )
    click.echo(f"\n{summary}")


def _process_section(n: int, runs: int, cores: int, expected: int) -> None:
    """The same sum over multiprocessing.Pool in equal chunks (no GIL, but pickling)."""
    import multiprocessing

    click.echo(f"\n## multiprocessing.Pool, same sum in equal chunks; seconds, {runs} runs\n")
    ctx = multiprocessing.get_context("spawn")
    prow = []
    base = None
    for p in thread_counts(cores, oversubscribe=False):
        with ctx.Pool(p) as procs:
            procs.map(_chunk, [(0, 1)] * p)  # warm up the workers
            times = []
            for _ in range(runs):
                step = -(-n // (4 * p))
                chunks = [(lo, min(n, lo + step)) for lo in range(0, n, step)]
                t0 = time.perf_counter()
                got = sum(procs.map(_chunk, chunks))
                times.append(time.perf_counter() - t0)
                if got != expected:
                    raise RuntimeError(f"multiprocessing({p}) summed {got}, expected {expected}")
        med = statistics.median(times)
        base = base or med
        prow.append([p, median_spread(times, "{:.3f}"), f"{base / med:.2f}x"])
    click.echo(markdown_table(["processes", "seconds", "speed-up"], prow))


def _native_section(sizes: list[int], runs: int) -> None:
    """The C deque over arrays of ``sizes`` MiB: LIFO against FIFO locality."""
    from concur.native import deque_table

    click.echo(
        f"\n## Native C: tree over an array, one pass per task, leaves of 4,096 elements; "
        f"ms, median (min-max) of {runs} runs\n"
    )
    table = deque_table(sizes, runs=runs)
    nrows = []
    for mb in sizes:
        lifo = next(r for r in table if r.megabytes == mb and r.order == "lifo")
        fifo = next(r for r in table if r.megabytes == mb and r.order == "fifo")
        nrows.append(
            [
                f"{mb} MiB",
                f"{lifo.tasks:,}",
                spread(lifo.median * 1e3, lifo.low * 1e3, lifo.high * 1e3, "{:.1f}"),
                spread(fifo.median * 1e3, fifo.low * 1e3, fifo.high * 1e3, "{:.1f}"),
                f"{fifo.median / lifo.median:.2f}x",
                lifo.max_deque,
                f"{fifo.max_deque:,}",
            ]
        )
    click.echo(markdown_table(["array", "tasks", "LIFO ms", "FIFO ms", "FIFO/LIFO", "peak LIFO", "peak FIFO"], nrows))
