"""RedisTokenBucket under faults, against real redis-servers started per test.

Configuration errors (wrong password, ACL, wrong type, TLS, OOM, READONLY, a NOSCRIPT that
SCRIPT LOAD does not cure, a peer that is not Redis) must raise whatever ``on_error`` says.
Outages (closed port, a connect that hangs, SIGSTOP, restart, DEBUG SLEEP, CLIENT PAUSE, BUSY)
must cost one decision at most its budget, then the breaker decides every further one at once
until a probe finds Redis back. Time bounds here are generous behavioural bounds (seconds
against a 50 ms budget); the breaker runs on a fake clock so that what it does is counted,
not timed.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable

import pytest

from concur.bench import redis_server as redis_servers
from concur.primitives import CircuitBreaker, CircuitOpenError, Decision, RedisTokenBucket

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.redis


class Recorder:
    """An ``on_error`` policy that denies (so an outage decision cannot pass for Redis's) and
    records what it was shown: the transport error of a call, or ``CircuitOpenError`` for a
    decision the breaker made without calling Redis."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, exc: BaseException, n: float) -> Decision:
        self.seen.append(type(exc).__name__)
        return Decision(False, 0.0, 1.0)


# Budgets: outage tests use 0.25 s, so that a healthy call on a loaded machine still fits while
# 20 undefended decisions (5 s) would not pass the 3 s bound; configuration-error tests use
# seconds, since an error is seen only when Redis answers within the budget.
OUTAGE_BUDGET = 0.25
SLOW_OK = 5.0


def guarded(client, clock, key="k", capacity=10, rate=1e-6, **kw) -> RedisTokenBucket:
    """A bucket whose breaker runs on the test's fake clock (jitter 0: back-off 0.1 s, 0.2 s, ...)."""
    kw.setdefault("on_error", Recorder())
    kw.setdefault("budget", OUTAGE_BUDGET)
    breaker = CircuitBreaker(clock=clock, jitter=lambda: 0.0)
    return RedisTokenBucket(client, key, capacity, rate, breaker=breaker, **kw)


def timed(call: Callable[[], object]) -> tuple[object, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def ride_out(bucket: RedisTokenBucket, decisions: int = 20) -> tuple[list[Decision], float]:
    """``decisions`` decisions in a row during an outage, and the seconds they took in total."""
    return timed(lambda: [bucket.try_acquire() for _ in range(decisions)])  # type: ignore[return-value]


def assert_rode_out(bucket: RedisTokenBucket, outcome: tuple[list[Decision], float]) -> None:
    decisions, seconds = outcome
    assert not any(d.allowed for d in decisions)  # the policy decided every one
    seen = bucket._on_error.seen[-len(decisions) :]  # type: ignore[union-attr]
    assert seen[0] in ("TimeoutError", "ConnectionError", "BusyLoadingError"), seen
    assert seen[1:] == ["CircuitOpenError"] * (len(decisions) - 1)  # only the first one called Redis
    breaker = bucket.breaker
    assert (breaker.state, breaker.opened, breaker.failures, breaker.probes) == ("open", 1, 1, 0)  # asked once
    assert seconds < 3.0, seconds  # one budget (0.25 s) plus nothing: generous


def assert_recovers(bucket: RedisTokenBucket, clock) -> None:
    errors = bucket.errors
    clock.advance(60)  # past any back-off: the next decision is the probe
    assert bucket.try_acquire().allowed
    assert bucket.breaker.state == "closed" and bucket.errors == errors


# --- configuration errors always raise ------------------------------------------------------


def test_wrong_password_raises_even_when_failing_open(redis_server):
    server = redis_server("--requirepass", "s3cret")
    for client in (redis.Redis(port=server.port, password="wrong"), redis.Redis(port=server.port)):
        bucket = RedisTokenBucket(client, "k", 10, 1, on_error="open", budget=SLOW_OK)
        for _ in range(3):
            with pytest.raises(redis.exceptions.AuthenticationError) as info:
                bucket.try_acquire()
        assert "whatever on_error says" in str(info.value) + "".join(getattr(info.value, "__notes__", []))
        assert bucket.errors == 0 and bucket.breaker.state == "closed"
    good = RedisTokenBucket(redis.Redis(port=server.port, password="s3cret"), "k", 10, 1, budget=SLOW_OK)
    assert good.try_acquire() == Decision(True, 9.0, 0.0)


@pytest.mark.parametrize(
    "rules",
    [
        ["~*", "+@all", "-evalsha"],  # may not run the script
        ["~other:*", "+@all"],  # may not touch the bucket's key
        ["~*", "+@all", "-script"],  # may run it but not load it (after SCRIPT FLUSH)
    ],
    ids=["no-evalsha", "no-key", "no-script-load"],
)
def test_acl_user_without_permission_raises(redis_server, rules):
    server = redis_server()
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "limited", "on", ">pw", *rules)
    admin.script_flush()
    limited = redis.Redis(port=server.port, username="limited", password="pw")
    bucket = RedisTokenBucket(limited, "k", 10, 1, budget=SLOW_OK)
    with pytest.raises(redis.exceptions.NoPermissionError, match="NOPERM.*grant it"):
        bucket.try_acquire()
    assert bucket.errors == 0


def test_out_of_memory_raises(redis_server):
    server = redis_server("--maxmemory", "1", "--maxmemory-policy", "noeviction")
    bucket = RedisTokenBucket(redis.Redis(port=server.port), "k", 10, 1, budget=SLOW_OK)
    with pytest.raises(redis.exceptions.OutOfMemoryError, match="maxmemory"):
        bucket.try_acquire()


def test_a_replica_raises_readonly(redis_server):
    primary, replica = redis_server(), redis_server()
    redis.Redis(port=replica.port).execute_command("REPLICAOF", "127.0.0.1", primary.port)
    bucket = RedisTokenBucket(redis.Redis(port=replica.port), "k", 10, 1, budget=SLOW_OK)
    with pytest.raises(redis.exceptions.ReadOnlyError, match="replica"):
        bucket.try_acquire()


class FakeServer:
    """A loopback TCP peer that answers each RESP command with ``answer(command)``.

    Stands in where real Redis cannot produce the fault: a proxy that loses scripts, a peer
    that is not Redis, and the "not now" replies LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN.
    """

    def __init__(self, answer: Callable[[list[bytes]], bytes]) -> None:
        self.answer = answer
        self.commands: list[bytes] = []
        self.conns: list[socket.socket] = []  # accepted; shut down by close() to end a blocked read
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.conns.append(conn)
            with conn, conn.makefile("rb") as stream:
                conn.settimeout(10)
                try:
                    while not self.stopping.is_set():
                        header = stream.readline()
                        if not header.startswith(b"*"):
                            break
                        command = []
                        for _ in range(int(header[1:])):
                            size = int(stream.readline()[1:])
                            command.append(stream.read(size + 2)[:-2])
                        self.commands.append(command[0].upper())
                        conn.sendall(self.answer(command))
                except OSError:
                    pass

    def close(self) -> None:
        self.stopping.set()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()
        self.listener.close()


@pytest.fixture
def fake_server():
    servers: list[FakeServer] = []

    def start(answer: Callable[[list[bytes]], bytes]) -> FakeServer:
        servers.append(FakeServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def scripted(evalsha_reply: bytes, script_load_reply: bytes = b"") -> Callable[[list[bytes]], bytes]:
    def answer(command: list[bytes]) -> bytes:
        name = command[0].upper()
        if name == b"EVALSHA":
            return evalsha_reply
        if name == b"SCRIPT":
            return script_load_reply
        return b"+OK\r\n"  # the handshake (CLIENT SETINFO)

    return answer


def test_a_noscript_that_script_load_does_not_cure_raises(fake_server):
    from concur.primitives.redis_bucket import SCRIPT_SHA

    sha = SCRIPT_SHA.encode()
    server = fake_server(scripted(b"-NOSCRIPT No matching script.\r\n", b"$40\r\n" + sha + b"\r\n"))
    bucket = RedisTokenBucket(redis.Redis(port=server.port), "k", 10, 1, budget=SLOW_OK)
    with pytest.raises(redis.exceptions.NoScriptError, match="after SCRIPT LOAD"):
        bucket.try_acquire()
    assert [c for c in server.commands if c != b"CLIENT"] == [b"EVALSHA", b"SCRIPT", b"EVALSHA"]  # no loop
    other = fake_server(scripted(b"-NOSCRIPT No matching script.\r\n", b"$3\r\nabc\r\n"))
    with pytest.raises(redis.exceptions.ResponseError, match="rewrites scripts"):
        RedisTokenBucket(redis.Redis(port=other.port), "k", 10, 1, budget=SLOW_OK).try_acquire()


def test_a_peer_that_is_not_redis_raises(fake_server):
    server = fake_server(scripted(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    bucket = RedisTokenBucket(redis.Redis(port=server.port), "k", 10, 1, budget=SLOW_OK)
    with pytest.raises(redis.exceptions.InvalidResponse, match="not answering like a Redis server"):
        bucket.try_acquire()
    assert bucket.errors == 0


@pytest.mark.parametrize(
    "reply, raised",
    [
        (b"-ERR user_script:1: Script attempted to access nonexistent global variable\r\n", "ResponseError"),
        (b"-OOM command not allowed when used memory > 'maxmemory'.\r\n", "OutOfMemoryError"),
        (b"-READONLY You can't write against a read only replica.\r\n", "ReadOnlyError"),
        (b"-MOVED 3999 127.0.0.1:6381\r\n", "ResponseError"),  # a cluster node behind a plain client
        (b"$-1\r\n", "InvalidResponse"),  # nil: the script always answers a string
        (b":1\r\n", "InvalidResponse"),
    ],
)
def test_other_error_replies_raise(fake_server, reply, raised):
    server = fake_server(scripted(reply))
    bucket = RedisTokenBucket(redis.Redis(port=server.port), "k", 10, 1, on_error="open", budget=SLOW_OK)
    with pytest.raises(getattr(redis.exceptions, raised)):
        bucket.try_acquire()
    assert bucket.errors == 0


@pytest.mark.parametrize(
    "reply, says",
    [
        (b"$100000000\r\n", "a bulk reply of 100,000,000 bytes"),
        (b"$99999999999999\r\n", "a bulk reply of 99,999,999,999,999 bytes"),
        (b"$abc\r\n", "a bulk reply of no length"),
        (b"-ERR " + b"x" * 1_000_000 + b"\r\n", "a reply line of more than 65,536 bytes"),
    ],
    ids=["100MB", "100TB", "no-length", "1MB-line"],
)
def test_a_reply_larger_than_any_decision_is_refused_unread(fake_server, reply, says):
    """The bucket allocated whatever size a peer announced (2 GB took 5 s of a 0.5 s budget; 100 TB
    raised MemoryError), a length that is not a number raised ValueError, and a 1 MB error line
    became a 1 MB exception. Each is a peer that is not Redis: refused, nothing buffered."""
    import tracemalloc

    server = fake_server(scripted(reply))
    bucket = RedisTokenBucket(redis.Redis(port=server.port), "k", 10, 1, on_error="open", budget=SLOW_OK)
    tracemalloc.start()
    try:
        with pytest.raises(redis.exceptions.InvalidResponse, match=says):
            bucket.try_acquire()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000 and bucket.errors == 0


@pytest.mark.parametrize("code", ["LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"])
def test_not_now_replies_are_outages(fake_server, clock, code):
    server = fake_server(scripted(b"-" + code.encode() + b" try again later\r\n"))
    seen: list[BaseException] = []

    def policy(exc: BaseException, n: float) -> Decision:
        seen.append(exc)
        return Decision(False, 0.0, 1.0)

    bucket = guarded(redis.Redis(port=server.port), clock, on_error=policy)
    assert bucket.try_acquire() == Decision(False, 0.0, 1.0)
    assert isinstance(seen[0], redis.exceptions.ConnectionError) and code in str(seen[0])
    assert bucket.try_acquire() == Decision(False, 0.0, 1.0)  # skipped by the open breaker
    assert isinstance(seen[1], CircuitOpenError) and seen[1].retry_in == pytest.approx(0.1)


def test_tls_works_and_a_certificate_that_does_not_verify_raises(redis_server, tmp_path, openssl_exe):
    def openssl(*args: str) -> None:
        subprocess.run([openssl_exe, *args], check=True, capture_output=True, cwd=tmp_path, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other"):
        openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN={ca}")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (tmp_path / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    tls_port = redis_servers.free_port()  # this worker's block (tests/conftest.py)
    redis_server(
        "--tls-port",
        str(tls_port),
        "--tls-cert-file",
        str(tmp_path / "server.crt"),
        "--tls-key-file",
        str(tmp_path / "server.key"),
        "--tls-ca-cert-file",
        str(tmp_path / "ca.crt"),
        "--tls-auth-clients",
        "no",
    )

    def tls_client(ca: str):
        return redis.Redis(host="127.0.0.1", port=tls_port, ssl=True, ssl_ca_certs=str(tmp_path / ca))

    bucket = RedisTokenBucket(tls_client("ca.crt"), "k", 10, 1e-6, budget=5)
    assert [bucket.try_acquire(4).allowed for _ in range(3)] == [True, True, False]
    bad = RedisTokenBucket(tls_client("other.crt"), "k", 10, 1, on_error="open", budget=5)
    with pytest.raises(redis.exceptions.ConnectionError, match="certificate verify failed"):
        bad.try_acquire()
    assert bad.errors == 0


# --- outages: one budget, then the breaker -------------------------------------------------


def test_closed_port_twenty_decisions_in_under_three_seconds(closed_port):
    client = redis.Redis(host="127.0.0.1", port=closed_port)  # the documented client, its default retries
    bucket = RedisTokenBucket(client, "k", 10, 2, on_error="open")
    decisions, seconds = ride_out(bucket)
    assert decisions == [Decision(True, 9.0, 0.0)] * 20
    assert bucket.errors == 20 and bucket.breaker.opened == 1
    assert seconds < 3.0, seconds


def test_unavailable_redis_uses_the_policy(closed_port, clock):
    client = redis.Redis(host="127.0.0.1", port=closed_port)
    assert RedisTokenBucket(client, "k", 10, 2, on_error="open").try_acquire(3) == Decision(True, 7.0, 0.0)
    closed = guarded(client, clock, rate=2, on_error="closed")
    assert closed.try_acquire(3) == Decision(False, 0.0, 1.5)
    assert closed.acquire(timeout=0) is False
    seen = []

    def policy(exc, n):
        seen.append((type(exc).__name__, n))
        return Decision(False, 0.0, 42.0)

    custom = guarded(client, clock, on_error=policy)
    assert custom.try_acquire(2).retry_after == 42.0
    assert custom.try_acquire(2).retry_after == 42.0
    assert seen == [("ConnectionError", 2.0), ("CircuitOpenError", 2.0)]
    bad = guarded(client, clock, on_error=lambda exc, n: True)
    with pytest.raises(TypeError, match="must return a Decision"):
        bad.try_acquire()


def test_the_default_policy_keeps_a_local_share_of_the_limit(closed_port, clock):
    """on_error="local" (the default): a quarter of the policy for one of 4 processes, paced on the clock."""
    client = redis.Redis(host="127.0.0.1", port=closed_port)
    bucket = RedisTokenBucket(
        client, "k", 8, 4, processes=4, clock=clock, breaker=CircuitBreaker(clock=clock, jitter=lambda: 0.0)
    )
    assert (bucket.processes, bucket.local.capacity, bucket.local.rate) == (4, 2.0, 1.0)
    got = [bucket.try_acquire() for _ in range(3)]
    assert [d.allowed for d in got] == [True, True, False]  # its share of the burst: 2 of 8
    assert got[2].retry_after == pytest.approx(1.0)  # its share of the rate: 1 of 4 per second
    assert not bucket.try_acquire(3).allowed  # more than its share of the burst: denied for the outage
    clock.advance(10.0)  # the breaker probes again (refused) and the local bucket refilled
    assert [bucket.try_acquire().allowed for _ in range(3)] == [True, True, False]
    assert bucket.errors == 7 and bucket.breaker.failures == 2
    assert RedisTokenBucket(client, "k", 8, 4, processes=16).local.capacity == 1.0  # at least one token
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="processes"):
            RedisTokenBucket(client, "k", 8, 4, processes=bad)


def test_a_connect_that_hangs_is_bounded_by_the_budget(clock):
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)  # never accepts
    port = listener.getsockname()[1]
    filler = []
    for _ in range(4):  # fill the accept queue: later SYNs are dropped, connects hang
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        filler.append(s)
    try:
        bucket = guarded(redis.Redis(host="127.0.0.1", port=port), clock)
        assert_rode_out(bucket, ride_out(bucket))
    finally:
        for s in filler:
            s.close()
        listener.close()


def test_frozen_server_costs_one_budget_then_nothing(redis_server, clock):
    server = redis_server()
    bucket = guarded(redis.Redis(port=server.port), clock)  # default client: socket_timeout 5 s, retries
    assert bucket.try_acquire().allowed  # connected
    server.freeze()
    try:
        assert_rode_out(bucket, ride_out(bucket))
        # a process that starts now: the kernel accepts its connection, the handshake gets no reply
        fresh = guarded(redis.Redis(port=server.port), clock)
        assert_rode_out(fresh, ride_out(fresh))
        clock.advance(60)
        probe, seconds = timed(bucket.try_acquire)
        assert not probe.allowed and seconds < 2.0  # type: ignore[attr-defined]
        assert (bucket.breaker.failures, bucket.breaker.probes) == (2, 1)
    finally:
        server.thaw()
    assert_recovers(bucket, clock)


def test_restart_loses_the_script_and_the_state_and_recovers(redis_server, clock):
    server = redis_server()
    bucket = guarded(redis.Redis(port=server.port), clock)
    assert [bucket.try_acquire(5).allowed for _ in range(3)] == [True, True, False]
    server.restart()  # our idle connection is dead now, the script cache and the bucket are gone
    assert bucket.try_acquire() == Decision(True, 9.0, 0.0)  # same decision: reconnect, NOSCRIPT, reload
    assert bucket.errors == 0 and bucket.breaker.state == "closed"
    server.stop()
    assert_rode_out(bucket, ride_out(bucket))
    server.start()
    assert_recovers(bucket, clock)
    assert float(redis.Redis(port=server.port).hget(bucket.key, "tokens")) == pytest.approx(9.0)  # state lost


def test_debug_sleep(redis_server, clock):
    server = redis_server("--enable-debug-command", "yes")
    bucket = guarded(redis.Redis(port=server.port), clock)
    assert bucket.try_acquire().allowed
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sleeper:
        sleeper.sendall(b"DEBUG SLEEP 2\r\n")
        wait_until_silent(server.port)
        assert_rode_out(bucket, ride_out(bucket))
        assert sleeper.recv(16).startswith(b"+OK")  # the sleep is over
    assert_recovers(bucket, clock)


def wait_until_silent(port: int) -> None:
    """Return once the server does not answer a PING within 0.2 s (it is blocked)."""
    for _ in range(100):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
            probe.settimeout(0.2)
            probe.sendall(b"PING\r\n")
            try:
                probe.recv(16)
            except TimeoutError:
                return
    raise AssertionError(f"the server on port {port} kept answering")


def test_client_pause_write(redis_server, clock):
    server = redis_server()
    admin = redis.Redis(port=server.port)
    bucket = guarded(redis.Redis(port=server.port), clock)
    assert bucket.try_acquire().allowed
    admin.execute_command("CLIENT", "PAUSE", 30000, "WRITE")  # what a failover does for a moment
    try:
        assert_rode_out(bucket, ride_out(bucket))
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
    assert_recovers(bucket, clock)


def test_a_busy_script_is_an_outage(redis_server, clock):
    server = redis_server("--busy-reply-threshold", "10")
    bucket = guarded(redis.Redis(port=server.port), clock)
    assert bucket.try_acquire().allowed
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as runner:
        runner.sendall(b'EVAL "while true do end" 0\r\n')
        admin = redis.Redis(port=server.port)
        for _ in range(1000):  # until the server answers BUSY to everyone else
            try:
                admin.ping()
            except redis.exceptions.ResponseError as exc:
                assert "BUSY" in str(exc)
                break
        assert_rode_out(bucket, ride_out(bucket))
        admin.execute_command("SCRIPT", "KILL")
        assert runner.recv(64).startswith(b"-")  # the script's error reply: killed
    assert_recovers(bucket, clock)
