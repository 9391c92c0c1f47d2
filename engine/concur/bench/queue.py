"""``concur bench queue``: the bounded queue's hand-off cost and the pool's throughput.

Two measurements, each against the standard library doing the same thing:

1. put+get pairs per second, one thread, queue never blocking:
   ``concur BoundedQueue`` (bound 1024) vs ``queue.Queue(1024)``; also
   ``collections.deque`` append+popleft as the floor (no lock, no bound).
2. items per second through ``WorkerPool(fn, workers, bound)``, both paths:
   ``submit`` (a ``Future`` per item, exceptions recorded) and ``map`` (the bulk
   path: results by position, no per-item handle), vs a bare pipeline:
   ``queue.Queue(bound)``, the same number of threads each calling ``fn`` in a
   ``try``, one ``None`` sentinel per thread -- once delivering each result
   through a stock ``concurrent.futures.Future`` (the same contract as
   ``submit``), once storing results in a list (no per-item handle: the floor,
   the same contract as ``map``). ``fn`` burns ``--work`` iterations of a Python
   loop so the comparison covers the per-item overhead at a realistic task size;
   ``--work 0`` shows the bare overhead. Both ratios are printed for every row.
   The peer users would pick stands beside them:
   ``concurrent.futures.ThreadPoolExecutor(workers)``, the same items submitted the
   same way (``submit`` each, then ``result()`` each, leaving the ``with`` block waits
   for all); its queue is unbounded, so it never makes the producer wait. The ratio
   ``WorkerPool.submit / ThreadPoolExecutor`` closes the report.

Runs are interleaved and the best of ``--repeats`` is reported with the median.
Nothing is asserted: this reports.
"""

from __future__ import annotations

import os
import queue as stdlib_queue
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

import click

__all__ = ["command"]


def _pairs(put: Callable[[int], object], get: Callable[[], object], n: int) -> float:
    start = time.perf_counter_ns()
    for i in range(n):
        put(i)
        get()
    return (time.perf_counter_ns() - start) / n


def _make_work(work: int) -> Callable[[int], int]:
    def fn(x: int) -> int:
        total = x
        for i in range(work):
            total += i
        return total

    return fn


def _pool_run(fn: Callable[[int], int], items: int, workers: int, bound: int) -> float:
    from concur.primitives import WorkerPool

    start = time.perf_counter()
    with WorkerPool(fn, workers=workers, bound=bound) as pool:
        submit = pool.submit
        futures = [submit(i) for i in range(items)]
    elapsed = time.perf_counter() - start
    assert futures[-1].result() == fn(items - 1)
    return items / elapsed


def _executor_run(fn: Callable[[int], int], items: int, workers: int, bound: int) -> float:
    """items/s through ``ThreadPoolExecutor(workers)`` (``bound`` unused: its queue is unbounded)."""
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as executor:
        submit = executor.submit
        futures = [submit(fn, i) for i in range(items)]
    elapsed = time.perf_counter() - start
    assert futures[-1].result() == fn(items - 1)
    return items / elapsed


def _map_run(fn: Callable[[int], int], items: int, workers: int, bound: int) -> float:
    from concur.primitives import WorkerPool

    start = time.perf_counter()
    with WorkerPool(fn, workers=workers, bound=bound) as pool:
        results = pool.map(range(items))
    elapsed = time.perf_counter() - start
    assert results[-1] == fn(items - 1)
    return items / elapsed


def _bare_run(fn: Callable[[int], int], items: int, workers: int, bound: int, futures: bool) -> float:
    """items/s through queue.Queue(bound) + threads; with ``futures`` each item also
    gets a ``Future`` carrying its result, which is the pool's contract."""
    results: list[object] = [None] * items
    work_queue: stdlib_queue.Queue[tuple[Future[int] | None, int] | None] = stdlib_queue.Queue(bound)

    def worker() -> None:
        get = work_queue.get
        while True:
            entry = get()
            if entry is None:
                return
            future, i = entry
            if future is None:
                try:
                    results[i] = fn(i)
                except Exception as exc:
                    results[i] = exc
                continue
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(i))
            except Exception as exc:
                future.set_exception(exc)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    put = work_queue.put
    handles: list[Future[int] | None] = []
    for i in range(items):
        future: Future[int] | None = Future() if futures else None
        handles.append(future)
        put((future, i))
    for _ in threads:
        put(None)
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    last = handles[-1].result() if futures else results[-1]  # type: ignore[union-attr]
    assert last == fn(items - 1)
    return items / elapsed


@click.command("queue")
@click.option("--iterations", type=click.IntRange(1), default=200_000, show_default=True, help="put+get pairs per run")
@click.option(
    "--items", type=click.IntRange(1), default=50_000, show_default=True, help="items through each pool per run"
)
@click.option("--workers", type=click.IntRange(1), default=4, show_default=True)
@click.option("--bound", type=click.IntRange(1), default=64, show_default=True)
@click.option(
    "--work", type=click.IntRange(0), default=200, show_default=True, help="loop iterations inside fn per item"
)
@click.option("--repeats", type=click.IntRange(1), default=5, show_default=True)
def command(iterations: int, items: int, workers: int, bound: int, work: int, repeats: int) -> None:
    """Time queue hand-offs and WorkerPool throughput against the standard library."""
    from concur.primitives.worker_queue import BoundedQueue

    click.echo(
        f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  switch interval: {sys.getswitchinterval()} s"
    )

    ours: BoundedQueue[int] = BoundedQueue(1024)
    std: stdlib_queue.Queue[int] = stdlib_queue.Queue(1024)
    dq: deque[int] = deque()
    contenders: dict[str, tuple[Callable[[int], object], Callable[[], object]]] = {
        "concur BoundedQueue(1024)": (ours.put, ours.get),
        "queue.Queue(1024)": (std.put, std.get),
        "floor: deque append+popleft": (dq.append, dq.popleft),
    }
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, (put, get) in contenders.items():
            samples[name].append(_pairs(put, get, iterations))
    ref = min(samples["concur BoundedQueue(1024)"])
    click.echo(f"\nput+get pairs, one thread, {iterations} x {repeats}  (ratio = contender / concur)")
    click.echo(f"{'contender':30} {'best ns/pair':>13} {'median':>9} {'pairs/s':>12} {'x concur':>9}")
    for name, v in samples.items():
        best = min(v)
        click.echo(f"{name:30} {best:13.0f} {statistics.median(v):9.0f} {1e9 / best:12,.0f} {best / ref:9.2f}")

    fn = _make_work(work)
    same, floor = "bare Queue + threads + Future", "bare Queue + threads, no Future"
    pool_name, map_name = "concur WorkerPool.submit", "concur WorkerPool.map"
    executor = "ThreadPoolExecutor.submit"
    runs: dict[str, list[float]] = {pool_name: [], map_name: [], executor: [], same: [], floor: []}
    for _ in range(repeats):
        runs[pool_name].append(_pool_run(fn, items, workers, bound))
        runs[map_name].append(_map_run(fn, items, workers, bound))
        runs[executor].append(_executor_run(fn, items, workers, bound))
        runs[same].append(_bare_run(fn, items, workers, bound, futures=True))
        runs[floor].append(_bare_run(fn, items, workers, bound, futures=False))
    ref_same, ref_floor, ref_executor = max(runs[same]), max(runs[floor]), max(runs[executor])
    click.echo(
        f"\nthroughput, {items} items, {workers} workers, bound {bound}, work {work} "
        f"(fn alone: {_fn_ns(fn):.0f} ns/item)"
    )
    click.echo(
        f"{'contender':32} {'best items/s':>13} {'median':>10} {'x same-work':>12} {'x no-Future':>12} "
        f"{'x executor':>11}"
    )
    for name, v in runs.items():
        best = max(v)
        click.echo(
            f"{name:32} {best:13,.0f} {statistics.median(v):10,.0f} "
            f"{best / ref_same:12.2f} {best / ref_floor:12.2f} {best / ref_executor:11.2f}"
        )
    click.echo(
        f"\ntarget: pool >= 0.70x a bare queue.Queue + threads pipeline. Against the "
        f"no-Future floor: submit {max(runs[pool_name]) / ref_floor:.2f}x, "
        f"map {max(runs[map_name]) / ref_floor:.2f}x; against the pipeline with a "
        f"Future per item: submit {max(runs[pool_name]) / ref_same:.2f}x"
    )
    click.echo(
        f"peer: concurrent.futures.ThreadPoolExecutor({workers}); WorkerPool.submit / "
        f"ThreadPoolExecutor.submit = {max(runs[pool_name]) / ref_executor:.2f}x items/s "
        f"(>1: the pool is faster), map {max(runs[map_name]) / ref_executor:.2f}x"
    )


def _fn_ns(fn: Callable[[int], int]) -> float:
    start = time.perf_counter_ns()
    for i in range(10_000):
        fn(i)
    return (time.perf_counter_ns() - start) / 10_000
