"""``concur bench counter``: what a sharded counter buys in CPython, and what only C can show.

Three tables, each the median and spread (min-max) of ``--runs`` runs:

1. Python threads: increments/s for ShardedCounter, LockedCounter and a bare
   int under a lock, 1..N threads (N = cores, at least 2, and 2x cores), at
   the default and two shorter ``sys.setswitchinterval`` values.  Under the GIL
   the rate does not grow with threads; sharding only removes the lock cost.
2. Python processes (``multiprocessing``): each process counts privately and
   the totals are summed at the end -- sharding across processes, which does
   scale with cores.
3. Native C (``--native``): one shared atomic vs 128 B padded shards vs
   adjacent 8 B shards, relaxed vs seq_cst, 1..N threads pinned to cores.

Every run checks its total is exact; a lost increment aborts the benchmark.
The helpers here (``median_spread``, ``markdown_table``, ``core_count``,
``thread_counts``) are shared with ``concur bench deque``.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence

import click

__all__ = ["command", "core_count", "markdown_table", "median_spread", "python_thread_rate", "spread", "thread_counts"]

SWITCH_INTERVALS = (0.005, 1e-4, 1e-6)


def core_count() -> int:
    """CPUs this process may run on (affinity-aware where the OS says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def thread_counts(cores: int, oversubscribe: bool = True) -> list[int]:
    """1, 2, 4, ... up to max(2, cores), plus 2 x that when ``oversubscribe``."""
    top = max(2, cores)
    counts = [1]
    while counts[-1] * 2 < top:
        counts.append(counts[-1] * 2)
    if counts[-1] != top:
        counts.append(top)
    if oversubscribe:
        counts.append(2 * top)
    return counts


def spread(median: float, low: float, high: float, fmt: str = "{:,.0f}") -> str:
    """``median (low-high)`` formatted with ``fmt``."""
    return f"{fmt.format(median)} ({fmt.format(low)}-{fmt.format(high)})"


def median_spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    """``median (min-max)`` of ``values`` formatted with ``fmt``."""
    return spread(statistics.median(values), min(values), max(values), fmt)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-markdown table (pastes straight into docs/)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _make_adder(kind: str) -> tuple[Callable[[], None], Callable[[], int]]:
    from concur.primitives import LockedCounter, ShardedCounter

    if kind == "ShardedCounter":
        c = ShardedCounter()
        return c.add, c.value
    if kind == "LockedCounter":
        lc = LockedCounter()
        return lc.add, lc.value
    lock = threading.Lock()  # guards box["v"], the bare int
    box = {"v": 0}

    def add() -> None:
        with lock:
            box["v"] += 1

    return add, lambda: box["v"]


def python_thread_rate(kind: str, threads: int, total: int) -> float:
    """Increments/s of ``threads`` threads sharing ``total`` increments of one counter ``kind``.

    ``kind`` is ``ShardedCounter``, ``LockedCounter`` or ``int+lock``.  Raises
    ``RuntimeError`` if the final value is not exact.
    """
    per = max(1, total // threads)
    add, value = _make_adder(kind)
    barrier = threading.Barrier(threads + 1)

    def body() -> None:
        barrier.wait()
        for _ in range(per):
            add()

    workers = [threading.Thread(target=body) for _ in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    if value() != per * threads:
        raise RuntimeError(f"{kind}: counted {value()}, expected {per * threads} (lost increments)")
    return per * threads / elapsed


def _process_count(n: int) -> int:
    from concur.primitives import ShardedCounter

    c = ShardedCounter()
    add = c.add
    for _ in range(n):
        add()
    return c.value()


def multiprocessing_rate(processes: int, total: int, pool_cache: dict[int, object]) -> float:
    """Increments/s with ``processes`` worker processes each counting ``total/processes`` privately."""
    pool = pool_cache[processes]
    per = max(1, total // processes)
    t0 = time.perf_counter()
    counts = pool.map(_process_count, [per] * processes)  # type: ignore[attr-defined]
    elapsed = time.perf_counter() - t0
    if sum(counts) != per * processes:
        raise RuntimeError(f"multiprocessing: counted {sum(counts)}, expected {per * processes}")
    return per * processes / elapsed


@click.command(name="counter")
@click.option("--runs", default=5, show_default=True, type=click.IntRange(1, 50), help="runs per cell")
@click.option("--ops", default=200_000, show_default=True, type=click.IntRange(1000), help="Python increments per run")
@click.option("--native/--no-native", default=True, show_default=True, help="also run the C measurement")
@click.option("--native-ms", default=100, show_default=True, type=click.IntRange(5, 5000), help="ms per C run")
@click.option("--max-threads", type=click.IntRange(1, 256), default=None, help="override the thread counts' top")
def command(runs: int, ops: int, native: bool, native_ms: int, max_threads: int | None) -> None:
    """Sharded vs locked counters: Python threads, processes, and native C atomics."""
    cores = core_count()
    counts = thread_counts(max_threads or cores, oversubscribe=max_threads is None)
    click.echo(
        f"cores: {cores}   python: {sys.version.split()[0]}   "
        f"GIL: {getattr(sys, '_is_gil_enabled', lambda: True)()}   threads: {counts}"
    )
    click.echo(f"\n## Python threads: increments/s, median (min-max) of {runs} runs, {ops:,} increments per run\n")
    old = sys.getswitchinterval()
    rows = []
    top: dict[str, float] = {}  # counter -> median rate at the top thread count, default interval
    try:
        for interval in SWITCH_INTERVALS:
            sys.setswitchinterval(interval)
            for kind in ("ShardedCounter", "LockedCounter", "int+lock"):
                cells = []
                for n in counts:
                    rates = [python_thread_rate(kind, n, ops) for _ in range(runs)]
                    cells.append(median_spread(rates))
                    if interval == SWITCH_INTERVALS[0] and n == counts[-1]:
                        top[kind] = statistics.median(rates)
                rows.append([f"{interval:g} s", kind, *cells])
    finally:
        sys.setswitchinterval(old)
    click.echo(markdown_table(["switch interval", "counter", *[f"{n} thr" for n in counts]], rows))
    click.echo(
        f"\npeer: an int under a threading.Lock (what one writes by hand); at {counts[-1]} threads, "
        f"{SWITCH_INTERVALS[0]:g} s: ShardedCounter / int+lock = {top['ShardedCounter'] / top['int+lock']:.2f}x "
        f"increments/s, LockedCounter / int+lock = {top['LockedCounter'] / top['int+lock']:.2f}x"
    )

    import multiprocessing

    procs = thread_counts(cores, oversubscribe=False)
    click.echo(f"\n## Python processes (multiprocessing, private counters summed): increments/s, {runs} runs\n")
    ctx = multiprocessing.get_context("spawn")
    pools: dict[int, object] = {}
    try:
        for n in procs:
            pools[n] = ctx.Pool(n)
            pools[n].map(_process_count, [1] * n)  # type: ignore[attr-defined]  # warm up
        base = None
        prow = []
        for n in procs:
            vals = [multiprocessing_rate(n, ops * 10, pools) for _ in range(runs)]
            base = base or statistics.median(vals)
            prow.append([n, median_spread(vals), f"{statistics.median(vals) / base:.2f}x"])
    finally:
        for p in pools.values():
            p.close()  # type: ignore[attr-defined]
            p.join()  # type: ignore[attr-defined]
    click.echo(markdown_table(["processes", "increments/s", "speed-up"], prow))

    if not native:
        return
    from concur.native import counter_table

    click.echo(
        f"\n## Native C11 atomics: increments/s (all threads), median (min-max) of {runs} runs of {native_ms} ms\n"
    )
    table = counter_table(counts, runs=runs, ms=native_ms)
    nrows = [
        [r.order, r.mode, *[spread(c.median, c.low, c.high) for c in table if c.order == r.order and c.mode == r.mode]]
        for r in table
        if r.threads == counts[0]
    ]
    click.echo(markdown_table(["order", "layout", *[f"{n} thr" for n in counts]], nrows))
