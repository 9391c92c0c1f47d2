"""``concur bench limiter``: the cost of one rate-limit decision, in-process and on Redis.

In-process, every contender answers "may this request go?" with the answer yes
(limits too generous to bind), one thread, no contention:

* ``concur TokenBucket.try_acquire`` -- the bucket under test;
* ``floor`` -- a bare bucket written inline: a lock, ``time.monotonic`` and a float
  refill, returning a bool. No validation, no result object: what any correct
  in-process bucket must at least pay;
* ``limits`` -- moving window over ``MemoryStorage``. Its window keeps one entry per
  admitted hit and prepends to a list, so to keep the lists short the hits cycle over
  1024 keys (the library's cost per decision, not its list growth, is measured);
* ``pyrate-limiter`` -- ``Limiter`` over an in-memory bucket, non-blocking.

In asyncio, on one event loop, one task, every request admitted at once:
``await AsyncTokenBucket.acquire()`` against ``await aiolimiter.AsyncLimiter.acquire()``
(the asyncio limiter people pick; a leaky bucket that reads ``loop.time()``), both
awaited in the same loop so the coroutine and ``await`` costs are alike. Then the
same two with the rate binding: 100 and 1,000 tasks share one limiter refilled at
2,000/s and each acquires in a loop; the figure is process CPU time per admission,
the same admitted count for both (waiting is free, so the CPU is what the waiting
machinery costs).

On Redis (a server from ``--redis-url``, else a temporary ``redis-server`` on
loopback; skipped with a message when neither exists): ``RedisTokenBucket`` against a
bare ``EVALSHA`` of a script that returns 1 -- once through redis-py's
``execute_command`` on the client's pooled connection, once as pre-packed bytes on a raw
socket (the floor: no client library at all). Each is one round trip on one connection
of its own; the bucket's budget is raised to 5 s and the run is void if any decision
met an outage (a fail-open decision would look fast).

Each figure is the best (and median) of ``--repeats`` timed runs; ratios come from
the same run. Nothing is asserted: this reports.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import click

__all__ = ["command"]


def _measure(
    contenders: list[tuple[str, Callable[[], object]]], iterations: int, repeats: int
) -> list[tuple[str, float, float]]:
    """(name, best, median) nanoseconds per call for each contender."""

    def timed(call: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter_ns()
            for _ in loop:
                call()
            return (time.perf_counter_ns() - start) / iterations

        return run

    loop = range(iterations)
    return _interleave([(name, timed(call)) for name, call in contenders], repeats)


def _interleave(runs: list[tuple[str, Callable[[], float]]], repeats: int) -> list[tuple[str, float, float]]:
    """(name, best, median) of ``repeats`` calls of each timed run (each returns ns per call).

    Runs are interleaved (A B C, A B C, ...) so that a noisy neighbour or a CPU
    frequency change hits every contender alike and the ratios stay meaningful.
    """
    samples: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _ in range(repeats):
        for name, run in runs:
            samples[name].append(run())
    return [(name, min(v), statistics.median(v)) for name, v in samples.items()]


def _floor_bucket(capacity: float, rate: float) -> Callable[[], bool]:
    """The bare locked float bucket: the floor any in-process bucket must pay."""
    lock = threading.Lock()
    monotonic = time.monotonic
    state = [capacity, monotonic()]

    def try_acquire() -> bool:
        with lock:
            now = monotonic()
            tokens = min(capacity, state[0] + (now - state[1]) * rate)
            state[1] = now
            if tokens >= 1:
                state[0] = tokens - 1
                return True
            state[0] = tokens
            return False

    return try_acquire


def _in_process(iterations: int, repeats: int) -> list[tuple[str, float, float]]:
    from concur.primitives import TokenBucket

    big = 1e12
    contenders: list[tuple[str, Callable[[], object]]] = [
        ("concur TokenBucket.try_acquire", TokenBucket(big, big).try_acquire),
        ("floor: bare locked float bucket", _floor_bucket(big, big)),
    ]
    missing = []
    try:
        from limits import RateLimitItemPerSecond
        from limits.storage import MemoryStorage
        from limits.strategies import MovingWindowRateLimiter

        limiter = MovingWindowRateLimiter(MemoryStorage())
        item = RateLimitItemPerSecond(10**9)
        keys = [f"k{i}" for i in range(1024)]
        counter = iter(range(10**15))

        def limits_hit() -> bool:
            return limiter.hit(item, keys[next(counter) & 1023])

        contenders.append(("limits moving window (memory)", limits_hit))
    except ImportError:
        missing.append(("limits (not installed)", math.nan, math.nan))
    try:
        from pyrate_limiter import Duration, Limiter, Rate

        pyrate = Limiter(Rate(2**40, Duration.SECOND))

        def pyrate_try() -> object:
            return pyrate.try_acquire("bench", blocking=False)

        contenders.append(("pyrate-limiter (in-memory)", pyrate_try))
    except ImportError:
        missing.append(("pyrate-limiter (not installed)", math.nan, math.nan))
    return _measure(contenders, iterations, repeats) + missing


def _in_asyncio(iterations: int, repeats: int) -> list[tuple[str, float, float]]:
    """(name, best, median) ns per awaited, admitted acquire; interleaved on one loop."""
    import asyncio

    from concur.primitives import AsyncTokenBucket

    big = 1e12
    contenders: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("concur AsyncTokenBucket.acquire", AsyncTokenBucket(big, big).acquire),
    ]
    missing = []
    try:
        from aiolimiter import AsyncLimiter

        contenders.append(("aiolimiter AsyncLimiter.acquire", AsyncLimiter(big, 1).acquire))
    except ImportError:
        missing.append(("aiolimiter (not installed)", math.nan, math.nan))

    async def awaited(acquire: Callable[[], Awaitable[object]]) -> float:
        start = time.perf_counter_ns()
        for _ in range(iterations):
            await acquire()
        return (time.perf_counter_ns() - start) / iterations

    def on_the_loop(acquire: Callable[[], Awaitable[object]]) -> Callable[[], float]:
        return lambda: loop.run_until_complete(awaited(acquire))

    loop = asyncio.new_event_loop()  # one loop for every run of both contenders
    try:
        return _interleave([(name, on_the_loop(acquire)) for name, acquire in contenders], repeats) + missing
    finally:
        loop.close()


def _contended(tasks: int, admitted: int, rate: float, repeats: int) -> list[tuple[str, float, float]]:
    """(name, best, median) CPU nanoseconds per admission with ``tasks`` tasks waiting on a binding rate.

    Each of ``tasks`` tasks acquires ``admitted // tasks`` times from one limiter of burst
    10 refilled at ``rate``/s, so the rate binds and most of them wait at any moment;
    the figure is the process CPU time (``time.process_time``) of the whole run divided
    by the admissions. Runs are interleaved, one fresh loop and limiter each.
    """
    import asyncio

    from concur.primitives import AsyncTokenBucket

    burst = 10.0
    each = max(1, admitted // tasks)
    total = each * tasks
    makers: list[tuple[str, Callable[[], Callable[[], Awaitable[object]]]]] = [
        ("concur AsyncTokenBucket.acquire", lambda: AsyncTokenBucket(burst, rate).acquire),
    ]
    missing = []
    try:
        from aiolimiter import AsyncLimiter

        makers.append(("aiolimiter AsyncLimiter.acquire", lambda: AsyncLimiter(burst, burst / rate).acquire))
    except ImportError:
        missing.append(("aiolimiter (not installed)", math.nan, math.nan))

    async def worker(acquire: Callable[[], Awaitable[object]]) -> None:
        for _ in range(each):
            await acquire()

    def one_run(make: Callable[[], Callable[[], Awaitable[object]]]) -> Callable[[], float]:
        def run() -> float:
            loop = asyncio.new_event_loop()
            try:

                async def everyone() -> None:
                    acquire = make()  # built on the loop that runs it
                    await asyncio.gather(*(worker(acquire) for _ in range(tasks)))

                start = time.process_time_ns()
                loop.run_until_complete(everyone())
                return (time.process_time_ns() - start) / total
            finally:
                loop.close()

        return run

    return _interleave([(name, one_run(make)) for name, make in makers], repeats) + missing


def _raw_evalsha(url: str, sha: str, key: str) -> tuple[Callable[[], bytes], Callable[[], None]]:
    """A bare EVALSHA round trip with no client library (pre-packed bytes, one socket, TCP_NODELAY),
    and the function that closes its socket."""
    import socket
    from urllib.parse import urlparse

    from concur.primitives.redis_bucket import resp_command

    where = urlparse(url)
    sock = socket.create_connection((where.hostname or "127.0.0.1", where.port or 6379))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    packed = resp_command(b"EVALSHA", sha.encode(), b"1", key.encode())

    def bare() -> bytes:
        sock.sendall(packed)
        reply = sock.recv(64)
        while not reply.endswith(b"\r\n"):
            reply += sock.recv(64)
        return reply

    return bare, sock.close


def _client(url: str) -> Any:
    """A client of the Redis at ``url`` that answered PING (a server starting up gets 10 s); a URL that
    is not one, or a server that does not answer, is a one-line usage error, not a traceback."""
    import redis

    try:
        client = redis.Redis.from_url(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--redis-url") from None
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return client
        except redis.exceptions.ConnectionError as exc:
            if time.monotonic() > deadline:
                raise click.BadParameter(
                    f"{url} did not answer PING within 10 s: {exc}", param_hint="--redis-url"
                ) from None
            time.sleep(0.02)


def _on_redis(url: str, iterations: int, repeats: int) -> tuple[list[tuple[str, float, float]], str]:
    client = _client(url)
    from concur.primitives import RedisTokenBucket

    # budget 5 s: this measures decisions, so no decision may be an on_error one (checked below)
    bucket = RedisTokenBucket(client, "bench", 1e12, 1e12, on_error="closed", budget=5.0)
    bucket.load()
    noop = client.execute_command("SCRIPT", "LOAD", "return 1").decode()
    key = "concur:tb:{bench}"

    def bare() -> object:
        return client.execute_command("EVALSHA", noop, 1, key)

    raw, close_raw = _raw_evalsha(url, noop, key)
    contenders: list[tuple[str, Callable[[], object]]] = [
        ("RedisTokenBucket.try_acquire", bucket.try_acquire),
        ("bare EVALSHA 'return 1', redis-py", bare),
        ("bare EVALSHA 'return 1', raw socket", raw),
    ]
    try:
        rows = _measure(contenders, iterations, repeats)
    finally:
        close_raw()
    if bucket.errors:
        raise click.ClickException(f"{bucket.errors} decisions met an outage during the run; the figures are void")
    server_us = []
    for call in (bucket.try_acquire, bare):  # server-side cost of each script: INFO commandstats deltas
        before = client.info("commandstats")["cmdstat_evalsha"]["usec"]
        for _ in range(1000):
            call()
        server_us.append((client.info("commandstats")["cmdstat_evalsha"]["usec"] - before) / 1000)
    note = (
        f"server time per EVALSHA (INFO commandstats, 1000 calls): bucket script {server_us[0]:.1f} us, "
        f"'return 1' {server_us[1]:.1f} us; outages during the run: {bucket.errors}"
    )
    client.close()
    return rows, note


def _print_table(title: str, rows: list[tuple[str, float, float]], reference: str) -> None:
    ref = {name: best for name, best, _ in rows}[reference]
    click.echo(f"\n{title}")
    click.echo(f"{'contender':36} {'best ns/op':>11} {'median':>9} {'ops/s':>11} {'x ' + 'concur':>9}")
    for name, best, median in rows:
        ratio = best / ref
        click.echo(f"{name:36} {best:11.0f} {median:9.0f} {1e9 / best:11,.0f} {ratio:9.2f}")


@click.command("limiter")
@click.option("--iterations", type=click.IntRange(1), default=200_000, show_default=True, help="calls per timed run")
@click.option(
    "--repeats", type=click.IntRange(1), default=5, show_default=True, help="timed runs; best and median shown"
)
@click.option(
    "--redis-url",
    default=None,
    help="Redis to use; default: start a temporary redis-server",
)
@click.option(
    "--redis-iterations",
    type=click.IntRange(1),
    default=5_000,
    show_default=True,
    help="calls per timed run on Redis",
)
@click.option(
    "--contended-admissions",
    type=click.IntRange(1),
    default=4_000,
    show_default=True,
    help="admissions per contended asyncio run (2 s each at 2,000/s)",
)
@click.option(
    "--contended-repeats",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="contended asyncio runs per contender",
)
def command(
    iterations: int,
    repeats: int,
    redis_url: str | None,
    redis_iterations: int,
    contended_admissions: int,
    contended_repeats: int,
) -> None:
    """Time one uncontended rate-limit decision: concur vs floor, limits, pyrate-limiter, aiolimiter, Redis."""
    if redis_url is not None:
        _client(redis_url)  # a URL that is not one, or a server that does not answer: refused before the timing
    click.echo(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  iterations: {iterations} x {repeats}")
    rows = _in_process(iterations, repeats)
    _print_table(
        "in-process, one thread (ratio = contender / concur; >1 means concur is faster)",
        rows,
        "concur TokenBucket.try_acquire",
    )
    ours_async = "concur AsyncTokenBucket.acquire"
    rows = _in_asyncio(iterations, repeats)
    _print_table("asyncio, one task on one loop, awaited acquire (ratio = contender / concur)", rows, ours_async)
    best = {name: b for name, b, _ in rows}
    peer = best.get("aiolimiter AsyncLimiter.acquire", math.nan)
    click.echo(f"concur / aiolimiter: {best[ours_async] / peer:.2f}x, best against best (target <= 1.00x)")
    for tasks in (100, 1000):
        rows = _contended(tasks, contended_admissions, 2000.0, contended_repeats)
        _print_table(
            f"asyncio, {tasks:,} tasks waiting on a binding rate of 2,000/s, {contended_admissions:,} admissions: "
            "CPU ns per admission (ratio = contender / concur)",
            rows,
            ours_async,
        )
        best = {name: b for name, b, _ in rows}
        peer = best.get("aiolimiter AsyncLimiter.acquire", math.nan)
        click.echo(
            f"concur / aiolimiter CPU at {tasks:,} waiting tasks: {best[ours_async] / peer:.2f}x (target <= 1.20x)"
        )
    if redis_url is not None:
        _redis_section(redis_url, redis_iterations, repeats)
        return
    from .redis_server import RedisUnavailable, local_redis

    try:
        with local_redis() as url:
            _redis_section(url, redis_iterations, repeats)
    except RedisUnavailable as exc:
        click.echo(f"\nRedis: skipped ({exc}; or pass --redis-url)")


def _redis_section(redis_url: str, redis_iterations: int, repeats: int) -> None:
    try:
        rows, note = _on_redis(redis_url, redis_iterations, repeats)
        _print_table("Redis, one connection each, loopback", rows, "RedisTokenBucket.try_acquire")
        click.echo(note)
    except ImportError:
        click.echo("\nRedis: skipped (the redis package is not installed)")
