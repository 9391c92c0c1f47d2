"""RedisTokenBucket against a real redis-server on loopback (skipped without one, unless CI=true)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from concur.primitives import Decision, RedisTokenBucket
from concur.primitives.redis_bucket import SCRIPT_SHA, ttl_ms

redis = pytest.importorskip("redis")
ENGINE = Path(__file__).resolve().parents[2] / "engine"
pytestmark = pytest.mark.redis


class CountingClient:
    """Wraps a redis client and records every command sent through it."""

    def __init__(self, client) -> None:
        self.client = client
        self.commands: list[str] = []

    def execute_command(self, *args):
        self.commands.append(str(args[0]).upper())
        return self.client.execute_command(*args)


class ServerClock:
    """Server time override in epoch microseconds (the script's test hook)."""

    def __init__(self) -> None:
        self.us = 1_700_000_000_000_000

    def __call__(self) -> int:
        return self.us

    def advance(self, seconds: float) -> None:
        self.us += round(seconds * 1e6)


def make_bucket(
    client, capacity=10, rate=2, key="k", **kw
) -> tuple[RedisTokenBucket, ServerClock]:
    bucket = RedisTokenBucket(client, key, capacity, rate, **kw)
    clock = ServerClock()
    bucket._test_now_us = clock
    return bucket, clock


def test_local_sha_matches_server(redis_client):
    bucket = RedisTokenBucket(redis_client, "k", 10, 1)
    assert bucket.load() == SCRIPT_SHA


def test_worked_example_on_redis(redis_client):
    bucket, clock = make_bucket(redis_client)
    assert bucket.key == "concur:tb:{k}"
    for i in range(10):
        assert bucket.try_acquire() == Decision(True, 9.0 - i, 0.0)
    assert bucket.try_acquire() == Decision(False, 0.0, 0.5)
    clock.advance(0.5)
    assert bucket.try_acquire().allowed
    clock.advance(2.5)
    assert bucket.try_acquire(4) == Decision(True, 1.0, 0.0)
    assert bucket.try_acquire(3) == Decision(False, 1.0, 1.0)


def test_fractions_survive_the_round_trip(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=3, rate=0.3)
    assert bucket.try_acquire(3).allowed
    clock.advance(1)
    decision = bucket.try_acquire()
    assert decision == Decision(
        False, pytest.approx(0.3), pytest.approx(7 / 3, abs=1e-6)
    )
    clock.advance(decision.retry_after)
    assert bucket.try_acquire().allowed


def test_state_ttl_and_missing_key_means_full(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=10, rate=2)
    bucket.try_acquire(7)
    state = redis_client.hgetall(bucket.key)
    assert float(state[b"tokens"]) == 3.0 and int(state[b"ts"]) == clock.us
    pttl = redis_client.pttl(bucket.key)
    assert ttl_ms(10, 2, 3) - 50 <= pttl <= ttl_ms(10, 2, 3)  # 3.5 s to full + 1 s
    assert pttl >= (10 - 3) / 2 * 1000  # never expires before the bucket is full
    redis_client.delete(bucket.key)  # what expiry does
    assert bucket.try_acquire(10).allowed


def test_clock_step_back_is_clamped(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=5, rate=1)
    assert bucket.try_acquire(5).allowed
    clock.advance(-60)
    assert bucket.try_acquire() == Decision(False, 0.0, 1.0)
    clock.advance(60.5)
    assert bucket.try_acquire() == Decision(False, 0.5, 0.5)


def test_rejection_keeps_refilled_tokens(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=4, rate=1)
    bucket.try_acquire(4)
    for _ in range(3):  # rejected calls must not lose the refill that happened
        clock.advance(1)
        assert not bucket.try_acquire(4).allowed
    clock.advance(1)
    assert bucket.try_acquire(4).allowed


def test_one_round_trip_per_decision_and_noscript_recovery(redis_client):
    counting = CountingClient(redis_client)
    bucket = RedisTokenBucket(counting, "rt", 100, 10)
    redis_client.script_flush()
    bucket.try_acquire()  # first call: EVALSHA -> NOSCRIPT, SCRIPT LOAD, EVALSHA
    assert counting.commands == ["EVALSHA", "SCRIPT", "EVALSHA"]
    counting.commands.clear()
    before = redis_client.info("commandstats")
    for _ in range(20):
        bucket.try_acquire()
    after = redis_client.info("commandstats")
    assert counting.commands == ["EVALSHA"] * 20
    assert after["cmdstat_evalsha"]["calls"] - before["cmdstat_evalsha"]["calls"] == 20
    calls = {k: v["calls"] for k, v in after.items()}
    # inside the script: one TIME, HMGET, HSET, PEXPIRE each per decision
    for name in ("time", "hmget", "hset", "pexpire"):
        assert calls[f"cmdstat_{name}"] - before[f"cmdstat_{name}"]["calls"] == 20
    redis_client.script_flush()  # a failover or restart forgets the script
    assert bucket.try_acquire().allowed


def test_wrong_type_key_raises(redis_client):
    redis_client.set("concur:tb:{str}", "x")
    bucket = RedisTokenBucket(redis_client, "str", 10, 1)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        bucket.try_acquire()


def test_bad_arguments():
    client = redis.Redis(host="127.0.0.1", port=1)
    with pytest.raises(ValueError, match="on_error"):
        RedisTokenBucket(client, "k", 10, 1, on_error="maybe")
    with pytest.raises(ValueError, match="key"):
        RedisTokenBucket(client, "", 10, 1)
    with pytest.raises(ValueError, match="finite"):
        RedisTokenBucket(client, "k", 10, float("inf"))
    with pytest.raises(ValueError, match="exceeds capacity"):
        RedisTokenBucket(client, "k", 10, 1).try_acquire(11)


class DownClient:
    """Behaves like a client whose server cannot be reached."""

    def execute_command(self, *args):
        raise redis.exceptions.ConnectionError(
            "Error 111 connecting to 127.0.0.1. Refused."
        )


def test_really_unreachable_port_fails_open():
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_connect_timeout=0.2,
        retry=Retry(NoBackoff(), 0),
    )
    bucket = RedisTokenBucket(client, "k", 10, 2)
    assert bucket.try_acquire() == Decision(True, 9.0, 0.0)
    assert bucket.errors == 1


def test_unreachable_redis_uses_the_policy():
    client = DownClient()
    open_bucket = RedisTokenBucket(client, "k", 10, 2)
    assert open_bucket.try_acquire(3) == Decision(True, 7.0, 0.0)
    assert open_bucket.acquire() is True
    assert open_bucket.errors == 2
    closed = RedisTokenBucket(client, "k", 10, 2, on_error="closed")
    assert closed.try_acquire(3) == Decision(False, 0.0, 1.5)
    assert closed.acquire(timeout=0) is False
    seen = []

    def policy(exc, n):
        seen.append((type(exc).__name__, n))
        return Decision(False, 0.0, 42.0)

    custom = RedisTokenBucket(client, "k", 10, 2, on_error=policy)
    assert custom.try_acquire(2).retry_after == 42.0
    assert seen == [("ConnectionError", 2.0)]
    bad = RedisTokenBucket(client, "k", 10, 2, on_error=lambda exc, n: True)
    with pytest.raises(TypeError, match="must return a Decision"):
        bad.try_acquire()


STRESS_WORKER = textwrap.dedent(
    """
    import sys, time, redis
    from concur.primitives import RedisTokenBucket
    url, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    bucket = RedisTokenBucket(redis.Redis.from_url(url), "fleet", 50, 100)
    bucket.load()
    while time.time() < start:
        time.sleep(0.001)
    admitted = calls = 0
    while time.time() < end:
        calls += 1
        admitted += bucket.try_acquire().allowed
    print(admitted, calls)
    """
)


def test_eight_processes_never_exceed_the_window_bound(redis_url):
    capacity, rate, processes, duration = 50, 100, 8, 1.5
    start = time.time() + 2.0  # leave time for the interpreters to start
    end = start + duration
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STRESS_WORKER, redis_url, repr(start), repr(end)],
            stdout=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(ENGINE)},
        )
        for _ in range(processes)
    ]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        results.append(tuple(map(int, out.split())))
    admitted = sum(a for a, _ in results)
    calls = sum(c for _, c in results)
    bound = capacity + rate * (duration + 0.05)  # 0.05 s: the last call's round trip
    assert calls > admitted, "the processes must have been throttled at least once"
    assert capacity <= admitted <= bound, (admitted, calls, bound)
