"""A fleet of 8 processes on one RedisTokenBucket through a 3 s Redis outage, per fault.

What is counted, not timed: every worker bins its admissions by ``time.monotonic()`` (one
clock for every process on Linux) into 10 ms bins and notes its last decision made by
``on_error``. The parent marks the outage window coarsely -- from the moment it sends the
fault to the moment Redis answers again -- and the test checks counts against the window
bound ``B = capacity + rate * T``:

* with the default ``on_error="local"`` (and ``processes=8``) the fleet admits at most 2 B
  inside the window (kill -9 and restart with data loss, SIGSTOP, CLIENT PAUSE);
* the shared bucket decides again within 5 s of Redis answering (the breaker's cap), and
  from then on the fleet keeps the shared bound.

``outage_run`` is also what the T6 chapter's over-admission table per mode was measured with.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from concur.primitives import RedisTokenBucket

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.redis

CAPACITY, RATE, PROCESSES = 40.0, 200.0, 8
BIN = 0.01  # seconds per admission bin
OUTAGE = 3.0  # seconds Redis is out
AFTER = 7.0  # seconds the fleet keeps going after Redis answers again
RESUME = 5.0  # the shared bucket must decide again this long after Redis answers (breaker cap)
BUDGET = 0.25  # a busy 2-core machine must not turn healthy calls into outages


def _worker(url: str, key: str, on_error: str, stop: Any, barrier: Any, results: Any) -> None:
    """Decide in a loop until ``stop``; report admission bins and outage decisions."""
    import redis as redis_py

    bucket = RedisTokenBucket(
        redis_py.Redis.from_url(url), key, CAPACITY, RATE, on_error=on_error, processes=PROCESSES, budget=BUDGET
    )
    give_up = time.monotonic() + 60
    while True:  # 8 processes starting on a busy machine: the first round trip may miss its budget
        try:
            bucket.load()
            break
        except redis_py.exceptions.RedisError:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)
    bins: dict[int, int] = {}
    outages = 0
    last_outage = 0.0
    barrier.wait(timeout=120)
    clock = time.monotonic
    while not stop.is_set():
        errors = bucket.errors
        decision = bucket.try_acquire()
        now = clock()
        if bucket.errors != errors:
            outages += 1
            last_outage = now
        if decision.allowed:
            b = int(now / BIN)
            bins[b] = bins.get(b, 0) + 1
        else:  # paced: a denied worker waits for its turn, at most 10 ms
            time.sleep(min(decision.retry_after, 0.01))
    results.put((bins, outages, last_outage))


def _inject(server: Any, fault: str) -> None:
    """Start the fault; ``_recover`` ends it. Both block until done."""
    if fault == "kill-9":
        os.kill(server.pid, signal.SIGKILL)
        server.proc.wait()
    elif fault == "sigstop":
        server.freeze()
    elif fault == "client-pause":
        admin = redis.Redis(port=server.port)
        admin.execute_command("CLIENT", "PAUSE", int(OUTAGE * 1000), "WRITE")
        admin.close()
    else:
        raise ValueError(fault)


def _recover(server: Any, fault: str) -> None:
    if fault == "kill-9":
        server.start()  # a new process: no data (no persistence), no scripts; waits for PING
    elif fault == "sigstop":
        server.thaw()
    client = redis.Redis(port=server.port, socket_timeout=30)
    while True:  # CLIENT PAUSE ends by itself; a write succeeds once it has
        try:
            client.set("concur:probe", "1")
            break
        except redis.exceptions.RedisError:
            time.sleep(0.01)
    client.close()


def outage_run(server: Any, on_error: str, fault: str, key: str = "fleet") -> dict[str, Any]:
    """Run 8 processes through one outage; the counts, the window and its bound."""
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    barrier = ctx.Barrier(PROCESSES + 1)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(server.url, key, on_error, stop, barrier, results)) for _ in range(PROCESSES)
    ]
    for w in workers:
        w.start()
    barrier.wait(timeout=120)
    time.sleep(1.0)  # the shared bucket is in use and empty: the rate binds
    began = time.monotonic()
    _inject(server, fault)
    time.sleep(OUTAGE)
    _recover(server, fault)
    back = time.monotonic()
    time.sleep(AFTER)
    stop.set()
    ended = time.monotonic()
    outcomes = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    bins: dict[int, int] = {}
    for got, _, _ in outcomes:
        for b, count in got.items():
            bins[b] = bins.get(b, 0) + count

    def admitted(start: float, end: float) -> int:
        """Admissions in every bin that overlaps [start, end] (an over-count, never an under-count)."""
        return sum(c for b, c in bins.items() if b * BIN < end and (b + 1) * BIN > start)

    window = back - began + 2 * BIN  # widened to whole bins, like the count
    steady_from = back + RESUME + 1.0  # a second to spare for a busy machine's scheduling
    return {
        "in_outage": admitted(began, back),
        "bound": CAPACITY + RATE * window,
        "window": window,
        "last_outage_after_back": max(last for _, _, last in outcomes) - back,
        "outage_decisions": sum(n for _, n, _ in outcomes),
        "steady": admitted(steady_from, ended),
        "steady_bound": CAPACITY + RATE * (ended - steady_from + 2 * BIN),
    }


@pytest.mark.parametrize("fault", ["kill-9", "sigstop", "client-pause"])
def test_eight_processes_stay_within_twice_the_bound_and_resume_the_shared_bucket(redis_server, fault):
    server = redis_server()
    got = outage_run(server, "local", fault)
    assert got["outage_decisions"] > 0, got  # the outage was seen: the local buckets decided
    assert got["in_outage"] <= 2 * got["bound"], got
    # the shared bucket decided every decision from RESUME s after Redis answered (coarse: +1 s)
    assert got["last_outage_after_back"] <= RESUME + 1.0, got
    assert got["steady"] <= got["steady_bound"], got


def test_failing_open_is_what_the_default_prevents(redis_server):
    """The same run with on_error="open": far above 2 B (so the bound above has teeth)."""
    server = redis_server()
    got = outage_run(server, "open", "kill-9")
    assert got["in_outage"] > 2 * got["bound"], got
