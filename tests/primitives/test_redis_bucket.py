"""RedisTokenBucket against a real redis-server on loopback (skipped without one, unless CI=true):
decisions, the script's repair of corrupted state, round trips, threads, forks and processes."""

from __future__ import annotations

import multiprocessing
import socket
import threading

import pytest

from concur.primitives import CircuitBreaker, Decision, RedisTokenBucket
from concur.primitives.redis_bucket import SCRIPT_SHA, ttl_ms

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.redis


class ServerClock:
    """Server time override in epoch microseconds (the script's test hook)."""

    def __init__(self) -> None:
        self.us = 1_700_000_000_000_000

    def __call__(self) -> int:
        return self.us

    def advance(self, seconds: float) -> None:
        self.us += round(seconds * 1e6)


# Tests of decisions give the bucket a budget of seconds: on a loaded machine a healthy call can
# take longer than the default 50 ms, and an outage decision must not pass for a real one.
SLOW_OK = 5.0


def make_bucket(client, capacity=10, rate=2, key="k", **kw) -> tuple[RedisTokenBucket, ServerClock]:
    kw.setdefault("budget", SLOW_OK)
    bucket = RedisTokenBucket(client, key, capacity, rate, **kw)
    clock = ServerClock()
    bucket._test_now_us = clock
    return bucket, clock


def commandstats(client) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): v["calls"] for name, v in client.info("commandstats").items()}


def test_local_sha_matches_server(redis_client):
    bucket = RedisTokenBucket(redis_client, "k", 10, 1, budget=SLOW_OK)
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
    assert bucket.try_acquire(3.0) == Decision(False, 1.0, 1.0)  # the packed command cache keys on value


def test_fractions_survive_the_round_trip(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=3, rate=0.3)
    assert bucket.try_acquire(3).allowed
    clock.advance(1)
    decision = bucket.try_acquire()
    assert decision == Decision(False, pytest.approx(0.3), pytest.approx(7 / 3, abs=1e-6))
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


def test_small_clock_step_back_is_clamped(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=5, rate=1)  # 5 s to fill
    assert bucket.try_acquire(5).allowed
    clock.advance(-3)  # behind the stored stamp by less than the time to fill: a clock step
    assert bucket.try_acquire() == Decision(False, 0.0, 1.0)
    clock.advance(3.5)  # the stored (later) stamp was kept: only 0.5 s of refill
    assert bucket.try_acquire() == Decision(False, 0.5, 0.5)


def test_rejection_keeps_refilled_tokens(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=4, rate=1)
    bucket.try_acquire(4)
    for _ in range(3):  # rejected calls must not lose the refill that happened
        clock.advance(1)
        assert not bucket.try_acquire(4).allowed
    clock.advance(1)
    assert bucket.try_acquire(4).allowed


# --- stored state is never trusted ----------------------------------------------------------

FULL = Decision(True, 9.0, 0.0)  # capacity 10: the decision of a full bucket
EMPTY = Decision(False, 0.0, 0.5)  # rate 2: the decision of an empty one


@pytest.mark.parametrize(
    "fields, decision",
    [
        ({"tokens": "-5"}, EMPTY),  # negative: clamped to 0, refills normally (see the follow-up)
        ({"tokens": "-inf"}, EMPTY),
        ({"tokens": "-1e308"}, EMPTY),
        ({"tokens": "nan"}, FULL),  # NaN would poison every comparison: reset to full
        ({"tokens": "NaN"}, FULL),
        ({"tokens": "lots"}, FULL),  # non-numeric: reset to full
        ({"tokens": ""}, FULL),
        ({"tokens": "inf"}, FULL),  # clamped to capacity, never more
        ({"tokens": "1e999"}, FULL),
        ({"tokens": "99"}, FULL),
        ({"ts": "nan"}, FULL),
        ({"ts": "soon"}, FULL),
        ({"ts": "-inf"}, FULL),  # infinitely old: refilled to capacity, no more
        ({"ts": None}, FULL),  # field missing
        ({"tokens": None}, FULL),
    ],
    ids=lambda v: repr(v),
)
def test_corrupted_state_is_repaired(redis_client, fields, decision):
    bucket, clock = make_bucket(redis_client)
    state = {"tokens": "0", "ts": str(clock.us)}
    state.update(fields)
    redis_client.delete(bucket.key)
    redis_client.hset(bucket.key, mapping={k: v for k, v in state.items() if v is not None})
    assert bucket.try_acquire() == decision
    stored = redis_client.hgetall(bucket.key)
    assert 0.0 <= float(stored[b"tokens"]) <= 10.0 and int(stored[b"ts"]) == clock.us
    clock.advance(0.5)
    assert bucket.try_acquire().allowed  # never locked


def test_a_timestamp_in_the_far_future_does_not_lock_the_bucket(redis_client):
    bucket, clock = make_bucket(redis_client)  # capacity 10, rate 2: 5 s to fill
    ten_years = 10 * 365 * 86400 * 10**6
    redis_client.hset(bucket.key, mapping={"tokens": "0", "ts": str(clock.us + ten_years)})
    assert bucket.try_acquire() == EMPTY  # stamp reset to the server's now, tokens kept
    assert int(redis_client.hget(bucket.key, "ts")) == clock.us
    clock.advance(0.5)
    assert bucket.try_acquire().allowed
    redis_client.hset(bucket.key, mapping={"tokens": "0", "ts": "inf"})
    assert bucket.try_acquire() == EMPTY


def test_a_timestamp_ahead_by_less_than_the_fill_time_is_a_clock_step(redis_client):
    bucket, clock = make_bucket(redis_client)  # 5 s to fill
    redis_client.hset(bucket.key, mapping={"tokens": "0", "ts": str(clock.us + 2_000_000)})
    assert not bucket.try_acquire().allowed
    clock.advance(2.4)
    assert not bucket.try_acquire().allowed  # refill counts from the kept, later stamp
    clock.advance(0.1)
    assert bucket.try_acquire().allowed


def test_negative_tokens_from_outside_only_cost_one_refill(redis_client):
    bucket, clock = make_bucket(redis_client, capacity=10, rate=2)
    redis_client.hset(bucket.key, mapping={"tokens": "-1000000", "ts": str(clock.us)})
    assert not bucket.try_acquire().allowed
    clock.advance(5)  # time to fill from 0, not from -1e6
    assert bucket.try_acquire(10).allowed


# --- round trips and the script cache -------------------------------------------------------


def test_one_round_trip_per_decision_and_noscript_recovery(redis_client):
    bucket = RedisTokenBucket(redis_client, "rt", 100, 10, budget=SLOW_OK)
    redis_client.script_flush()
    redis_client.config_resetstat()
    assert bucket.try_acquire().allowed  # EVALSHA -> NOSCRIPT; then SCRIPT LOAD + EVALSHA in one write
    calls = commandstats(redis_client)
    assert (calls["evalsha"], calls["script|load"]) == (2, 1)
    redis_client.config_resetstat()
    for _ in range(20):
        bucket.try_acquire()
    calls = commandstats(redis_client)
    assert calls["evalsha"] == 20 and "script|load" not in calls
    # inside the script: one TIME, HMGET, HSET, PEXPIRE each per decision
    assert [calls[name] for name in ("time", "hmget", "hset", "pexpire")] == [20] * 4
    redis_client.script_flush()  # a failover or restart forgets the script
    assert bucket.try_acquire().allowed
    assert bucket.errors == 0


def test_the_bucket_owns_its_connections_and_shares_them(redis_url):
    client = redis.Redis.from_url(redis_url, client_name="fleet-a")
    buckets = [RedisTokenBucket(client, f"user:{i}", 10, 1, budget=SLOW_OK) for i in range(50)]
    for bucket in buckets:
        assert bucket.try_acquire().allowed
    names = [c["name"] for c in client.client_list()]
    assert names.count("fleet-a") == 2  # the client's own connection (CLIENT LIST) + one shared by 50 buckets
    assert len({id(b.breaker) for b in buckets}) == 1  # one breaker per server
    mine = CircuitBreaker()
    assert RedisTokenBucket(client, "x", 10, 1, breaker=mine).breaker is mine
    client.close()


def test_redis_py_connections_still_expose_their_socket(redis_url):
    # The bucket drives redis-py's connection socket after the handshake; pin the attribute.
    conn = redis.Redis.from_url(redis_url).connection_pool.make_connection()
    conn.connect()
    assert isinstance(conn._sock, socket.socket)
    conn.disconnect()


def test_wrong_type_key_raises(redis_client):
    redis_client.set("concur:tb:{str}", "x")
    bucket = RedisTokenBucket(redis_client, "str", 10, 1, budget=SLOW_OK)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE.*another data type") as info:
        bucket.try_acquire()
    assert "whatever on_error says" in str(info.value)
    assert bucket.errors == 0


def test_bad_arguments(closed_port):
    client = redis.Redis(host="127.0.0.1", port=closed_port)
    with pytest.raises(ValueError, match="on_error"):
        RedisTokenBucket(client, "k", 10, 1, on_error="maybe")
    with pytest.raises(ValueError, match="key"):
        RedisTokenBucket(client, "", 10, 1)
    with pytest.raises(ValueError, match="finite"):
        RedisTokenBucket(client, "k", 10, float("inf"))
    with pytest.raises(ValueError, match="exceeds capacity"):
        RedisTokenBucket(client, "k", 10, 1).try_acquire(11)
    for budget in (0, -1, float("nan"), float("inf"), "soon"):
        with pytest.raises(ValueError, match="budget"):
            RedisTokenBucket(client, "k", 10, 1, budget=budget)
    with pytest.raises(TypeError, match="CircuitBreaker"):
        RedisTokenBucket(client, "k", 10, 1, breaker=object())


def test_unsupported_clients_are_refused():
    class Wrapper:
        def execute_command(self, *args):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match=r"redis\.Redis or redis\.cluster\.RedisCluster, got Wrapper"):
        RedisTokenBucket(Wrapper(), "k", 10, 1)
    import redis.asyncio

    with pytest.raises(TypeError, match="asyncio"):
        RedisTokenBucket(redis.asyncio.Redis(), "k", 10, 1)


# --- threads, forks, processes ---------------------------------------------------------------


def test_threads_never_over_admit_and_share_connections(redis_url, fast_switching):
    client = redis.Redis.from_url(redis_url, client_name="threads")
    bucket = RedisTokenBucket(client, "threads", 50, 1e-6, on_error="closed", budget=10)
    client.delete(bucket.key)
    start = threading.Barrier(8)
    admitted: list[int] = []

    def hammer() -> None:
        start.wait(timeout=60)
        admitted.append(sum(bucket.try_acquire().allowed for _ in range(100)))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sum(admitted) == 50 and bucket.errors == 0  # rate ~0: exactly the burst, 750 denials
    names = [c["name"] for c in client.client_list()]
    assert 1 <= names.count("threads") - 1 <= 8  # at most one connection per concurrent thread
    client.close()


def _decide_in_child(bucket: RedisTokenBucket, out) -> None:
    out.put(bucket.try_acquire().allowed)


def test_a_forked_child_opens_its_own_connection(redis_url):
    client = redis.Redis.from_url(redis_url, client_name="forked")
    bucket = RedisTokenBucket(client, "fork", 10, 1, on_error="closed", budget=10)
    assert bucket.try_acquire().allowed  # the parent now holds an idle connection
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_decide_in_child, args=(bucket, out))
    child.start()
    assert out.get(timeout=60) is True
    child.join(timeout=60)
    assert child.exitcode == 0
    assert bucket.try_acquire().allowed and bucket.errors == 0  # the parent's socket was not disturbed
    assert float(client.hget(bucket.key, "tokens")) < 7.5  # three debits: parent, child, parent


def _fleet_worker(url: str, key: str, capacity: float, rate: float, calls: int, barrier, results) -> None:
    import redis as redis_py

    bucket = RedisTokenBucket(redis_py.Redis.from_url(url), key, capacity, rate, on_error="closed", budget=10)
    bucket.load()  # connected and ready: the decisions below measure nothing but the bucket
    barrier.wait(timeout=120)
    admitted = sum(bucket.try_acquire().allowed for _ in range(calls))
    results.put((admitted, calls, bucket.errors))


def test_eight_processes_never_exceed_the_window_bound(redis_url, fleet):
    capacity, rate, processes, calls = 20, 20, 8, 300
    client = redis.Redis.from_url(redis_url)
    client.delete("concur:tb:{fleet}")
    outcomes, elapsed = fleet(_fleet_worker, (redis_url, "fleet", capacity, rate, calls), processes, client)
    admitted = sum(a for a, _, _ in outcomes)
    assert sum(c for _, c, _ in outcomes) == processes * calls
    assert sum(e for _, _, e in outcomes) == 0, outcomes
    assert capacity <= admitted <= capacity + rate * elapsed, (admitted, elapsed, outcomes)
    client.close()
