"""Token bucket shared by a fleet of processes, kept in Redis.

How is this designed, and why?
==============================

The algorithm is the in-process one (see ``token_bucket``): lazy refill, check and
debit as one atomic step. Across processes the atomic step is a Lua script, which
Redis runs without interleaving any other command.

State. One HASH per bucket, ``concur:tb:{key}`` with fields ``tokens`` (a decimal
string, round-trip exact) and ``ts`` (server time in integer microseconds). The
braces are a Redis Cluster hash tag: every key of one bucket maps to one slot, so
the script stays legal on a cluster. A missing key means *full*.

One script, one round trip. ``try_acquire`` sends one ``EVALSHA`` with the policy
(capacity, rate) and the cost; the reply is one string ``"allowed tokens retry_us"``.
The SHA1 is computed locally, so the constructor makes no network call. When the
server does not know the script (a restart, a failover, ``SCRIPT FLUSH``: the reply is
NOSCRIPT) the bucket sends ``SCRIPT LOAD`` and the ``EVALSHA`` again in one write, so
that decision costs two round trips and every later one costs one.

Inside the script:

* the clock is the server's ``TIME`` (integer seconds and microseconds, combined
  into epoch microseconds ~1.8e15, exact in a double, unlike epoch nanoseconds).
  Client clocks differ between hosts; one clock for the whole fleet is the point.
* stored state is never trusted: anyone with write access can put anything in the
  key. A missing, non-numeric or NaN ``tokens`` or ``ts`` resets the bucket to full
  (what a missing key means); ``tokens`` is clamped to [0, capacity] (so -5 or -inf
  cannot lock the bucket and +inf cannot mint tokens). A ``ts`` ahead of the server
  clock by less than the time to fill the bucket (``capacity / rate``) is a clock that
  stepped back (NTP, failover to a host whose clock is behind): elapsed time counts as
  zero and the later stamp is kept, which can under-admit for at most that long but
  never mints tokens. A ``ts`` further ahead is corruption (a bucket locked until the
  year 3000) and is reset to now.
* the rejected path also stores the refilled tokens with the new stamp, together;
  storing only one of them would lose refill (a client rejected in a loop would be
  locked out).
* the key's TTL is set with ``PEXPIRE`` to the time until the bucket is full again,
  rounded up, plus one second. Expiry therefore only removes a bucket that *is*
  full, so "missing means full" stays true; a shorter TTL would hand out a free refill.
* Lua numbers come back from Redis as truncated integers, so the reply is a string.

Worked example. capacity=10, rate=2 request/s, 4 processes each calling
``try_acquire()`` in a loop for 3 s: the fleet admits at most 10 + 2*3 = 16
requests in total, whichever processes win them.

Failure policy. Two kinds of failure, treated oppositely:

* *Configuration errors* are raised, whatever ``on_error`` says: a wrong password
  (redis-py's ``AuthenticationError``, although it subclasses ``ConnectionError``), an
  ACL user without permission (NOPERM), a key of the wrong type, a TLS certificate
  that does not verify, a NOSCRIPT that a ``SCRIPT LOAD`` on the same connection did
  not cure, a MOVED reply to a client that is not a cluster client, a replica that
  refuses writes (READONLY), any other error reply. Failing open on these would switch
  limiting off silently until someone reads the ``errors`` counter; they do not go
  away by waiting, so they must be seen at once.
* *Outages* -- refused, reset, timed out, a frozen server (SIGSTOP, ``DEBUG SLEEP``,
  ``CLIENT PAUSE``), and the replies that say "not now" (LOADING, BUSY, MASTERDOWN,
  CLUSTERDOWN, TRYAGAIN) -- are decided by ``on_error``: ``"local"`` (default), ``"open"``,
  ``"closed"``, or a callable ``on_error(exc, n) -> Decision``. ``errors`` counts how
  often the policy decided, so it can be alerted on.

Outage policy: a local share of the global bucket. A limiter outage must not take the
API down (Stripe's advice), but failing open switches the limit off: measured, 8
processes failing open admitted 1.49 M requests during a 3 s ``kill -9`` of Redis
against a bound of ~700. Failing closed takes the API down instead. The default,
``"local"``, keeps deciding with an in-process ``TokenBucket`` that holds this
process's share of the policy: ``capacity / processes`` burst (at least 1) and
``rate / processes`` refill, where ``processes`` is a constructor argument (default
1: one process holds the whole limit) that a fleet sets to the number of processes
sharing the key. N processes that each hold 1/N of the policy admit, together, at
most the global bound ``capacity + rate * T`` over an outage of T seconds (each local
bucket starts full: its 1/N of the burst). What it costs: the split is only as good
as ``processes`` (too low over-admits by that factor, too high under-admits), traffic
is not rebalanced (a process that gets more than 1/N of the requests is limited to
its share), and a request for more than ``capacity / processes`` tokens is denied
for the whole outage. When Redis answers again the shared bucket decides again: the
breaker below probes at most ``cap`` (5 s) after the last failure, so the fleet is
back on the shared bound within 5 s of Redis's return, without any caller waiting on
a dead server for more than one budget.

Budget. An outage must cost a decision little time, whatever the client was
configured with: redis-py's defaults retry a refused connection with back-off (seconds)
and wait for a frozen server as long as ``socket_timeout`` (forever when None). So each
decision has a deadline, ``budget`` seconds (default 0.05) after it starts, measured by
the bucket on ``time.monotonic`` (socket timeouts are real time, so an injected test
clock does not apply here), and every blocking step is given only the time left:

* The bucket opens its own connections, one per thread deciding at the same moment,
  shared by all buckets on the same client (a per-user bucket does not cost a
  connection per user). They are redis-py ``Connection`` objects of the client's own
  class, built from the client's pool settings -- so host, port, unix socket, TLS,
  username, password, credential provider, database and client name apply unchanged --
  with three settings overridden: no retries, no health-check PING, RESP2. The TCP (and
  TLS) connect gets half of the time left and each handshake reply (AUTH, SELECT,
  CLIENT SETINFO) the other half, so a server that accepts the connection and then
  says nothing costs at most the budget. (One that answers each handshake step slowly,
  just inside half the budget, can stretch a connect to a few budgets: the handshake is
  redis-py's, step by step. That is a slow server, not the silent one the budget guards.)
* After the handshake the bucket drives the socket itself (redis-py has no public
  accessor; ``_sock`` has been the attribute since redis-py 2 and a test pins it):
  before writing it sets the socket timeout to the time left, and again before each
  read. A frozen server therefore costs one budget, not ``socket_timeout``.
* A reply is read only up to 64 KiB (a decision's is ~40 bytes): a longer line, a bulk string
  announced longer, or a length that is not a number is a peer that is not Redis
  (``InvalidResponse``), refused before anything is buffered, so a peer announcing 2 GB costs
  neither the memory nor the time to allocate it.
* A connection found dead when reused (the server restarted or closed it while it was
  idle: EOF or reset, not a timeout) is replaced once within the same deadline, and the
  other idle connections to that server are dropped too. The command may have run
  before the reset; running it again debits twice, which only under-admits.

Why not bound the client's own call instead? A thread per call that is abandoned at the
deadline leaks a thread per decision while the server is frozen (and a client with
``socket_timeout=None`` never returns); one worker thread serialises the fleet's
decisions behind it. Setting the client's timeouts from the budget does not bound a
decision either: redis-py retries, reconnects and health-checks with its own timeouts,
and the pool hands out connections its own way. Owning the connection is the only
way to know what runs and for how long, and it also makes the hot path short: the
``EVALSHA`` for a given cost is packed once into bytes, written with one ``sendall``
and the fixed-shape reply is read straight from a reused buffer, without redis-py's
command packing, response callbacks, retry wrapper and pool bookkeeping.

Breaker. The deadline bounds one decision; ``CircuitBreaker`` (see
``circuit_breaker``) bounds the outage: after a failed call it refuses to call Redis
for a jittered, exponentially growing back-off (0.1..0.2 s, doubling to 2.5..5 s by
default), so every further decision is immediate and decided by ``on_error``; then one
decision probes and a success closes it. By default one breaker is shared by all
buckets on the same server (an outage is the server's, not the key's); pass
``breaker=CircuitBreaker(...)`` for other back-off settings or an injected clock.

Cluster. With a ``redis.cluster.RedisCluster`` client the bucket finds the primary of
its key's slot in the client's slot map (no network call), follows MOVED replies
(and remembers the new owner) and ASK replies (``ASKING`` then the script, once), and
keeps one breaker per node. After a transport failure it looks the slot up in the
client's map again, so when the client has learned of a failover the next decision
goes to the new primary.

Non-goals. Exactness across a failover (replicas lag; a promoted replica may have
forgotten recent debits and over-admit briefly); fairness between processes; the
blocking ``acquire`` polls with sleeps like the in-process one; refreshing a cluster's
topology itself (the RedisCluster client does that when it meets MOVED or an error on
its own commands); asyncio clients (``redis.asyncio``: not supported, refused at
construction); address remapping of cluster nodes (``address_remap``).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import math
import os
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from .circuit_breaker import CircuitBreaker, CircuitOpenError
from .token_bucket import Decision, TokenBucket, acquire_deadline, validate_cost, validate_policy

__all__ = ["SCRIPT", "SCRIPT_SHA", "RedisTokenBucket"]

SCRIPT = """
-- concur token bucket. KEYS[1]: bucket hash. ARGV: capacity, rate (per s), cost,
-- optional test clock in epoch microseconds (empty in production: server TIME).
-- Reply: one string "allowed tokens retry_us".
if redis.replicate_commands then redis.replicate_commands() end
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now
if ARGV[4] and ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local last = tonumber(state[2])
-- stored state is never trusted: repair it (see the module notes)
if tokens == nil or tokens ~= tokens or last == nil or last ~= last then
  tokens = capacity
  last = now
elseif last > now + capacity / rate * 1000000 then
  last = now
end
if tokens < 0 then tokens = 0 elseif tokens > capacity then tokens = capacity end
if now < last then now = last end
tokens = math.min(capacity, tokens + (now - last) * rate / 1000000)
local allowed = 0
local retry_us = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry_us = math.ceil((cost - tokens) / rate * 1000000)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'ts', string.format('%d', now))
local ttl_ms = math.ceil((capacity - tokens) / rate * 1000) + 1000
if ttl_ms > 281474976710655 then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl_ms))
end
return string.format('%d %.17g %.17g', allowed, tokens, retry_us)
"""

SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()

ErrorPolicy = str | Callable[[BaseException, float], Decision]

_monotonic = time.monotonic
_new_decision = tuple.__new__  # Decision(...) without the NamedTuple __new__ overhead


def resp_command(*parts: bytes) -> bytes:
    """One Redis command in RESP2 wire format (an array of bulk strings)."""
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


_SCRIPT_LOAD = resp_command(b"SCRIPT", b"LOAD", SCRIPT.encode())
_ASKING = resp_command(b"ASKING")
_MAX_HOPS = 5  # NOSCRIPT once, MOVED and ASK redirects: more means a misconfigured cluster
_BUFFER = 4096  # initial reply buffer; a decision's reply is ~40 bytes
_MAX_REPLY = 64 * 1024  # a longer reply is not the script's: refused before it is buffered
# server replies that mean "not now" (an outage), not "never" (a configuration error)
_UNAVAILABLE = frozenset({"BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"})
_HINTS = {
    "NOPERM": "the client's ACL user may not run this; grant it +evalsha +script|load and the key "
    "pattern (e.g. ~concur:tb:*)",
    "NOAUTH": "the server requires authentication: pass username/password to the client",
    "WRONGPASS": "the username or password is wrong",
    "WRONGTYPE": "the key holds another data type (another program wrote it): delete it or use another prefix",
    "OOM": "the server is at maxmemory with a noeviction policy: give it room or an evicting policy",
    "READONLY": "the client is connected to a replica: point it at the primary (or use Sentinel's master_for)",
    "NOSCRIPT": "EVALSHA still answers NOSCRIPT after SCRIPT LOAD on the same connection: is a proxy sending "
    "them to different servers?",
    "MOVED": "the server is a Redis Cluster node: pass a redis.cluster.RedisCluster client",
    "ASK": "the server is a Redis Cluster node: pass a redis.cluster.RedisCluster client",
}

_api: SimpleNamespace | None = None


def _redis() -> SimpleNamespace:
    """redis-py's exception classes and cluster client, imported on first use."""
    global _api
    if _api is None:
        import redis.exceptions as ex
        from redis.cluster import RedisCluster

        _api = SimpleNamespace(
            ex=ex,
            RedisCluster=RedisCluster,
            # ConnectionError subclasses that are configuration errors, not outages
            config=tuple(
                getattr(ex, name)
                for name in ("AuthenticationError", "AuthorizationError", "ExternalAuthProviderError")
                if hasattr(ex, name)
            ),
            classes={
                "NOSCRIPT": ex.NoScriptError,
                "NOPERM": ex.NoPermissionError,
                "NOAUTH": ex.AuthenticationError,
                "WRONGPASS": ex.AuthenticationError,
                "READONLY": ex.ReadOnlyError,
                "OOM": ex.OutOfMemoryError,
                "LOADING": ex.BusyLoadingError,
            },
        )
    return _api


class _Unavailable(Exception):
    """Internal: the call met an outage; ``cause`` is what the ``on_error`` policy is shown."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _ErrorReply(str):
    """An error reply from Redis, e.g. ``"NOSCRIPT No matching script."``."""

    @property
    def code(self) -> str:
        return self.split(" ", 1)[0]


def _is_tls_misconfiguration(exc: BaseException) -> bool:
    """True when a connect error was caused by TLS verification or a TLS protocol mismatch."""
    seen: BaseException | None = exc
    for _ in range(5):  # redis-py wraps the OSError it met into its own ConnectionError
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError) or type(seen) is ssl.SSLError:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _Link:
    """One connection the bucket drives itself: redis-py did the handshake, the socket is ours.

    Used by one thread at a time (it is checked out of ``_Endpoint._idle``). Replies are
    read into ``buf``; ``start:end`` is the part received and not yet parsed.
    """

    __slots__ = ("buf", "conn", "end", "sock", "start", "view")

    def __init__(self, conn: Any) -> None:
        sock = getattr(conn, "_sock", None)
        if not isinstance(sock, socket.socket):
            raise TypeError(
                f"RedisTokenBucket: after connect(), the redis-py connection {type(conn).__name__} has no "
                f"socket in ._sock (got {type(sock).__name__}); this redis-py version is not supported"
            )
        self.conn = conn
        self.sock = sock
        self.buf = bytearray(_BUFFER)
        self.view = memoryview(self.buf)
        self.start = self.end = 0

    def close(self) -> None:
        self.conn.disconnect()

    def exchange(self, payload: bytes, count: int, deadline: float) -> list[bytes | _ErrorReply]:
        """Write ``payload`` (``count`` pipelined commands), read ``count`` replies by ``deadline``.

        Raises ``TimeoutError`` at the deadline, another ``OSError`` when the connection
        drops, ``_ProtocolError`` on a reply that is not RESP2 text.
        """
        remaining = deadline - _monotonic()
        if remaining <= 0.0:
            raise TimeoutError("the deadline passed before the command was sent")
        self.sock.settimeout(remaining)
        self.sock.sendall(payload)
        if count == 1:
            return [self.read(deadline)]
        return [self.read(deadline) for _ in range(count)]

    def read(self, deadline: float) -> bytes | _ErrorReply:
        """One reply: a bulk or simple string as bytes, or an error reply."""
        while True:
            nl = self.buf.find(b"\r\n", self.start, self.end)
            if nl >= 0:
                break
            if self.end - self.start > _MAX_REPLY:
                raise _ProtocolError(f"a reply line of more than {_MAX_REPLY:,} bytes")
            self._fill(deadline, self.end - self.start + 1)
        buf, start = self.buf, self.start
        kind = buf[start]
        if kind == 36:  # '$': bulk string
            try:
                size = int(buf[start + 1 : nl])
            except ValueError:
                raise _ProtocolError(f"a bulk reply of no length: {bytes(buf[start:nl])[:80]!r}") from None
            head = nl + 2 - start
            total = head + size + 2
            if size < 0:
                raise _ProtocolError(f"expected a string reply, got a nil reply {bytes(buf[start:nl])!r}")
            if size > _MAX_REPLY:  # never allocate what the peer announces: it may be 2 GB
                raise _ProtocolError(f"a bulk reply of {size:,} bytes (a decision's is ~40)")
            while self.end - self.start < total:
                self._fill(deadline, total)
            buf, start = self.buf, self.start  # _fill may have moved the data
            value: bytes | _ErrorReply = bytes(buf[start + head : start + head + size])
            self.start = start + total
        elif kind == 43:  # '+': simple string
            value = bytes(buf[start + 1 : nl])
            self.start = nl + 2
        elif kind == 45:  # '-': error
            value = _ErrorReply(buf[start + 1 : nl].decode("utf-8", "replace"))
            self.start = nl + 2
        else:
            raise _ProtocolError(f"expected a string or error reply, got {bytes(buf[start : nl + 2])[:80]!r}")
        if self.start == self.end:
            self.start = self.end = 0
        return value

    def _fill(self, deadline: float, need: int) -> None:
        """Receive more bytes, making room for ``need`` unparsed bytes; bounded by ``deadline``."""
        if self.start + need > len(self.buf):
            pending = bytes(self.buf[self.start : self.end])
            if need > len(self.buf):
                self.view.release()
                self.buf = bytearray(max(need, 2 * len(self.buf)))
                self.view = memoryview(self.buf)
            self.buf[: len(pending)] = pending
            self.start, self.end = 0, len(pending)
        remaining = deadline - _monotonic()
        if remaining <= 0.0:
            raise TimeoutError("the deadline passed while waiting for the reply")
        self.sock.settimeout(remaining)
        received = self.sock.recv_into(self.view[self.end :])
        if received == 0:
            raise ConnectionResetError("the server closed the connection")
        self.end += received


class _ProtocolError(Exception):
    """Internal: the peer does not speak the RESP2 the bucket expects (not a Redis server?)."""


class _Endpoint:
    """One Redis server as the buckets see it: how to connect, idle connections, a breaker."""

    def __init__(self, connection_class: Any, kwargs: dict[str, Any]) -> None:
        self._cls = connection_class
        self._kwargs = kwargs
        self.host: str | None = kwargs.get("host")
        self.port: int | None = kwargs.get("port")
        self.where = f"unix:{kwargs['path']}" if kwargs.get("path") else f"{self.host}:{self.port}"
        self.breaker = CircuitBreaker()  # shared by the buckets that do not bring their own
        # Connections not in use. list.pop() and list.append() are atomic (the GIL; a
        # per-object lock on free-threaded builds), so checkout and return need no lock.
        self._idle: list[_Link] = []

    @classmethod
    def from_pool(cls, pool: Any) -> _Endpoint:
        """The endpoint of a redis-py connection pool: its class and settings, with ours on top."""
        connection_class = pool.connection_class
        if inspect.iscoroutinefunction(getattr(connection_class, "connect", None)):
            raise TypeError(
                "RedisTokenBucket: the client is an asyncio client (redis.asyncio); pass a synchronous "
                "redis.Redis or redis.cluster.RedisCluster"
            )
        kwargs = dict(pool.connection_kwargs)
        # redis-py 8's maintenance push notifications need RESP3 and belong to the client's pool
        kwargs.pop("maint_notifications_pool_handler", None)
        kwargs.pop("maint_notifications_config", None)
        # no retries (the deadline is ours), no PING before commands, RESP2 (no push frames)
        kwargs.update(retry=None, retry_on_timeout=False, retry_on_error=[], health_check_interval=0, protocol=2)
        return cls(connection_class, kwargs)

    def moved_to(self, host: str, port: int) -> _Endpoint:
        """An endpoint with the same settings at another address (a cluster node the client did not know)."""
        return _Endpoint(self._cls, {**self._kwargs, "host": host, "port": port})

    def discard_idle(self) -> None:
        """Close the idle connections (they met a restart, a READONLY demotion, or a fork)."""
        while True:
            try:
                link = self._idle.pop()
            except IndexError:
                return
            link.close()

    def open(self, deadline: float) -> _Link:
        """A new connection, handshake done, by ``deadline``; raises ``_Unavailable`` on an outage."""
        remaining = deadline - _monotonic()
        if remaining <= 0.0:
            raise _Unavailable(_redis().ex.TimeoutError(f"no time left to connect to {self.where}"))
        conn = self._cls(**self._kwargs)
        conn.socket_connect_timeout = remaining / 2  # see the module notes: connect + each handshake reply
        conn.socket_timeout = remaining / 2
        api = _redis()
        try:
            conn.connect()
            return _Link(conn)
        except api.config as exc:
            conn.disconnect()
            exc.add_note(
                f"RedisTokenBucket: connecting to {self.where}; raised whatever on_error says: check the "
                "client's username/password (ACL) or credential provider"
            )
            raise
        except (api.ex.ConnectionError, api.ex.TimeoutError, OSError) as exc:
            conn.disconnect()
            if _is_tls_misconfiguration(exc):
                exc.add_note(
                    f"RedisTokenBucket: TLS to {self.where} failed; raised whatever on_error says: check the "
                    "client's ssl_* settings (CA, certificate, hostname)"
                )
                raise
            raise _Unavailable(exc) from exc
        except BaseException:
            conn.disconnect()
            raise

    def exchange(self, payload: bytes, count: int, deadline: float) -> list[bytes | _ErrorReply]:
        """Send ``payload`` on an idle connection (or a new one) and read ``count`` replies.

        Raises ``_Unavailable`` on an outage (the connection is closed), redis-py's
        ``InvalidResponse`` when the peer does not speak RESP2, and whatever the
        handshake raised for a configuration error.
        """
        try:
            link = self._idle.pop()
        except IndexError:
            link = self.open(deadline)
        else:
            try:
                replies = link.exchange(payload, count, deadline)
            except TimeoutError as exc:
                link.close()
                raise _Unavailable(self._timeout(exc)) from exc
            except OSError:  # dropped while idle: replace it once, within the same deadline
                link.close()
                self.discard_idle()
                link = self.open(deadline)
            except BaseException as exc:
                link.close()
                raise self._protocol(exc) from exc
            else:
                self._idle.append(link)
                return replies
        try:
            replies = link.exchange(payload, count, deadline)
        except TimeoutError as exc:
            link.close()
            raise _Unavailable(self._timeout(exc)) from exc
        except OSError as exc:
            link.close()
            raise _Unavailable(_redis().ex.ConnectionError(f"connection to {self.where} lost: {exc}")) from exc
        except BaseException as exc:
            link.close()
            raise self._protocol(exc) from exc
        self._idle.append(link)
        return replies

    def _timeout(self, exc: BaseException) -> BaseException:
        # redis-py's exception classes reach us through the lazily built namespace, typed Any
        return cast(
            BaseException, _redis().ex.TimeoutError(f"no reply from {self.where} by the decision's deadline ({exc})")
        )

    def _protocol(self, exc: BaseException) -> BaseException:
        if isinstance(exc, _ProtocolError):
            return cast(
                BaseException,
                _redis().ex.InvalidResponse(
                    f"RedisTokenBucket: {self.where} is not answering like a Redis server: {exc}; "
                    "check the client's host and port"
                ),
            )
        return exc


# The endpoints, one per (client pool) or per (cluster client, node address), so that every
# bucket on one server shares its connections and its breaker. _registry_lock guards the
# inner dicts; it is taken when a bucket is built and when a cluster redirect names a node.
_registry_lock = threading.Lock()
_registry: weakref.WeakKeyDictionary[Any, dict[Any, _Endpoint]] = weakref.WeakKeyDictionary()


def _endpoint_of_pool(pool: Any) -> _Endpoint:
    with _registry_lock:
        endpoints = _registry.setdefault(pool, {})
        if None not in endpoints:
            endpoints[None] = _Endpoint.from_pool(pool)
        return endpoints[None]


def _endpoint_of_node(cluster: Any, host: str, port: int, template: _Endpoint | None) -> _Endpoint:
    node = cluster.get_node(host=host, port=port)
    pool = getattr(getattr(node, "redis_connection", None), "connection_pool", None)
    with _registry_lock:
        endpoints = _registry.setdefault(cluster, {})
        endpoint = endpoints.get((host, port))
        if endpoint is None:
            if pool is not None:
                endpoint = _Endpoint.from_pool(pool)
            elif template is not None:
                endpoint = template.moved_to(host, port)
            else:
                raise ValueError(f"RedisTokenBucket: the cluster client knows no node at {host}:{port}")
            endpoints[(host, port)] = endpoint
        return endpoint


def _endpoint_of(client: Any, key: str) -> _Endpoint:
    """Where ``key`` lives, from the client's settings (and slot map); no network call."""
    if isinstance(client, _redis().RedisCluster):
        node = client.get_node_from_key(key)
        return _endpoint_of_node(client, node.host, int(node.port), None)
    pool = getattr(client, "connection_pool", None)
    if pool is None or not hasattr(pool, "connection_kwargs") or not hasattr(pool, "connection_class"):
        raise TypeError(
            f"RedisTokenBucket: client must be a redis.Redis or redis.cluster.RedisCluster, got "
            f"{type(client).__name__}; the bucket needs the client's connection settings to open its own "
            "deadline-bounded connections"
        )
    return _endpoint_of_pool(pool)


def _forget_connections_after_fork() -> None:
    """In a forked child the parent's sockets are shared: never use them, just close our copies."""
    for endpoints in list(_registry.values()):
        for endpoint in endpoints.values():
            endpoint._idle, stale = [], endpoint._idle
            for link in stale:
                link.close()  # redis-py skips the shutdown() in a child: the parent keeps its socket


os.register_at_fork(after_in_child=_forget_connections_after_fork)


class RedisTokenBucket:
    """A token bucket whose state lives in Redis, shared by every process using ``key``.

    ``client``: a ``redis.Redis`` or ``redis.cluster.RedisCluster`` (synchronous); the bucket
    opens its own connections with its settings. ``key``: the bucket's name; stored as
    ``f"{prefix}{{{key}}}"``. ``capacity``/``rate``: as for ``TokenBucket`` (validated the
    same way); every user of the key must pass the same pair. ``on_error``: used when Redis
    is unavailable: ``"local"`` (default: decide with a local bucket holding 1/``processes``
    of the capacity and rate), ``"open"`` (allow), ``"closed"`` (deny) or a callable
    ``(exc, n) -> Decision``. ``processes``: how many processes share the key (default 1);
    set it to the fleet's size so that the fleet's outage admissions stay near the bound.
    ``budget``: seconds one decision may spend on Redis before ``on_error`` decides.
    ``breaker``: a ``CircuitBreaker`` (default: the one shared by all buckets on the server).

    ``try_acquire`` costs one round trip (two when the script must be reloaded) and at
    most ``budget`` seconds. Raises ``ValueError`` on bad arguments, ``TypeError`` for an
    unsupported client, and redis-py's exceptions for configuration errors (see the module
    notes), whatever ``on_error`` says.
    """

    def __init__(
        self,
        client: Any,
        key: str,
        capacity: float,
        rate: float,
        on_error: ErrorPolicy = "local",
        *,
        processes: int = 1,
        budget: float = 0.05,
        breaker: CircuitBreaker | None = None,
        prefix: str = "concur:tb:",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._capacity, self._rate = validate_policy(capacity, rate)
        if self._rate == math.inf:
            raise ValueError("RedisTokenBucket: rate must be finite; an infinite rate needs no limiter")
        if not isinstance(key, str) or not key:
            raise ValueError(f"RedisTokenBucket: key must be a non-empty string, got {key!r}")
        if not (callable(on_error) or on_error in ("local", "open", "closed")):
            raise ValueError(
                f"RedisTokenBucket: on_error must be 'local', 'open', 'closed' or a callable "
                f"(exc, n) -> Decision, got {on_error!r}"
            )
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise ValueError(
                f"RedisTokenBucket: processes (how many processes share the key) must be an integer >= 1, "
                f"got {processes!r}; during an outage each process keeps 1/processes of the limit"
            )
        try:
            budget = float(budget)
        except (TypeError, ValueError):
            budget = math.nan
        if not 0.0 < budget < math.inf:
            raise ValueError(
                f"RedisTokenBucket: budget must be a finite number of seconds > 0, got {budget!r}; "
                "tens of milliseconds suit a limiter in front of an API"
            )
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise TypeError(f"RedisTokenBucket: breaker must be a CircuitBreaker or None, got {breaker!r}")
        self.key = f"{prefix}{{{key}}}"
        self._cluster = client if isinstance(client, _redis().RedisCluster) else None
        self._endpoint = _endpoint_of(client, self.key)
        self._breaker = breaker
        self._on_error = on_error
        self._budget = budget
        self._clock = clock
        self._sleep = sleep
        self._head = (
            b"EVALSHA",
            SCRIPT_SHA.encode(),
            b"1",
            self.key.encode(),
            repr(self._capacity).encode(),
            repr(self._rate).encode(),
        )
        # cost -> the packed EVALSHA: the hot path sends these bytes as they are
        self._packed: dict[float, bytes] = {1.0: resp_command(*self._head, b"1.0")}
        self._test_now_us: Callable[[], int] | None = None  # tests only: replaces server TIME
        self._errors_lock = threading.Lock()  # guards _errors
        self._errors = 0
        self._processes = processes
        # on_error="local": this process's share of the policy, used only while Redis is out
        self._local = TokenBucket(max(1.0, self._capacity / processes), self._rate / processes, clock)

    @property
    def capacity(self) -> float:
        """The burst."""
        return self._capacity

    @property
    def rate(self) -> float:
        """Tokens per second."""
        return self._rate

    @property
    def processes(self) -> int:
        """How many processes share the key (``on_error="local"`` keeps 1/processes of the limit)."""
        return self._processes

    @property
    def local(self) -> TokenBucket:
        """The in-process bucket that decides during an outage with ``on_error="local"``."""
        return self._local

    @property
    def budget(self) -> float:
        """Seconds one decision may spend on Redis."""
        return self._budget

    @property
    def errors(self) -> int:
        """How often ``on_error`` decided (outages, and decisions skipped by the open breaker)."""
        return self._errors

    @property
    def breaker(self) -> CircuitBreaker:
        """The breaker in use: the one passed in, else the one shared by all buckets on this server."""
        return self._breaker or self._endpoint.breaker

    @property
    def where(self) -> str:
        """The server (``host:port`` or ``unix:path``) this bucket's decisions go to."""
        return self._endpoint.where

    def load(self) -> str:
        """Load the script into the server's cache now (``SCRIPT LOAD``); returns its SHA1.

        Raises on any failure, outages included (within ``budget``).
        """
        try:
            (reply,) = self._endpoint.exchange(_SCRIPT_LOAD, 1, _monotonic() + self._budget)
        except _Unavailable as exc:
            raise exc.cause from None
        if isinstance(reply, _ErrorReply):
            raise self._reply_error(reply, self._endpoint)
        return reply.decode()

    def try_acquire(self, n: float = 1) -> Decision:
        """Debit ``n`` tokens from the shared bucket if available now; never sleeps.

        Returns a ``Decision`` whose ``retry_after`` is rounded up to the server's
        microsecond; within ``budget`` seconds. Raises ``ValueError`` if ``n <= 0`` or
        ``n > capacity``, redis-py's exceptions on configuration errors.
        """
        packed = self._packed.get(n)
        if packed is None or self._test_now_us is not None:
            packed = self._pack(n)
        breaker = self._breaker or self._endpoint.breaker
        if not breaker.allow():
            return self._skip(breaker, n)
        try:
            payload = self._call(packed, _monotonic() + self._budget)
        except _Unavailable as exc:
            breaker.record_failure()
            if self._cluster is not None:
                self._reroute()
            return self._fail(exc.cause, n)
        except Exception:
            breaker.record_success()  # Redis answered: its error is a verdict, not an outage
            raise
        except BaseException:
            breaker.record_failure()  # interrupted mid-call: the state of the call is unknown
            raise
        breaker.record_success()
        allowed, tokens, retry_us = payload.split(b" ")
        return _new_decision(Decision, (allowed == b"1", float(tokens), float(retry_us) / 1e6))

    def acquire(self, n: float = 1, timeout: float | None = None) -> bool:
        """Block until ``n`` tokens are debited (True) or the timeout would pass (False).

        Same contract as ``TokenBucket.acquire``; the deadline is measured on the local
        ``clock``. With Redis down, ``on_error="local"`` paces it at this process's
        share of the rate, ``"closed"`` waits until the timeout, ``"open"`` returns True.
        """
        n = validate_cost(n, self._capacity)
        deadline = acquire_deadline(self._clock, timeout)
        while True:
            decision = self.try_acquire(n)
            if decision.allowed:
                return True
            wait = decision.retry_after
            if self._clock() + wait > deadline:
                return False
            self._sleep(wait)

    def _reroute(self) -> None:
        """After an outage on a cluster node: look the slot up again in the client's map, which the
        client refreshes when its own commands meet MOVED or a dead node (failover)."""
        with contextlib.suppress(Exception):  # the map has no owner for the slot right now: keep the last node
            self._endpoint = _endpoint_of(self._cluster, self.key)

    def _pack(self, n: float) -> bytes:
        """The EVALSHA for cost ``n`` (validated); cached for the first few costs seen."""
        cost = validate_cost(n, self._capacity)
        if self._test_now_us is not None:
            return resp_command(*self._head, repr(cost).encode(), str(self._test_now_us()).encode())
        packed = resp_command(*self._head, repr(cost).encode())
        if len(self._packed) < 16:
            self._packed[cost] = packed
        return packed

    def _call(self, packed: bytes, deadline: float) -> bytes:
        """Run the script by ``deadline``: NOSCRIPT once, then MOVED/ASK redirects; the reply string."""
        endpoint = self._endpoint
        load = asking = False
        for _ in range(_MAX_HOPS):
            prefix = (_SCRIPT_LOAD if load else b"") + (_ASKING if asking else b"")
            replies = endpoint.exchange(prefix + packed if prefix else packed, 1 + load + asking, deadline)
            reply = replies[-1]
            if prefix:
                self._check_preamble(replies, load, endpoint)
            if not isinstance(reply, _ErrorReply):
                return reply
            code = reply.code
            if code == "NOSCRIPT" and not load:
                load = True
            elif code in ("MOVED", "ASK") and self._cluster is not None:
                host, _, port = reply.split(" ")[2].rpartition(":")
                target = _endpoint_of_node(self._cluster, host, int(port), endpoint)
                if code == "MOVED":
                    self._endpoint = endpoint = target
                    load = asking = False
                else:
                    endpoint, asking = target, True
            else:
                raise self._reply_error(reply, endpoint)
        raise _redis().ex.ResponseError(
            f"RedisTokenBucket {self.key!r}: still redirected after {_MAX_HOPS} tries (last at "
            f"{endpoint.where}); the cluster's slot map is inconsistent: check CLUSTER SHARDS"
        )

    def _check_preamble(self, replies: list[bytes | _ErrorReply], load: bool, endpoint: _Endpoint) -> None:
        """Raise if SCRIPT LOAD or ASKING (sent before the EVALSHA) failed: that error explains the rest."""
        for earlier in replies[:-1]:
            if isinstance(earlier, _ErrorReply):
                raise self._reply_error(earlier, endpoint)
        if load and replies[0] != SCRIPT_SHA.encode():
            raise _redis().ex.ResponseError(
                f"RedisTokenBucket {self.key!r}: SCRIPT LOAD on {endpoint.where} returned {replies[0]!r}, "
                f"expected {SCRIPT_SHA}; something between the client and Redis rewrites scripts"
            )

    def _reply_error(self, reply: _ErrorReply, endpoint: _Endpoint) -> BaseException:
        """The exception for an error reply: ``_Unavailable`` for "not now", else a configuration error."""
        api = _redis()
        code = reply.code
        if code in _UNAVAILABLE:
            cls = api.classes.get(code, api.ex.ConnectionError)
            return _Unavailable(cls(f"{endpoint.where} answered {reply}"))
        if code == "READONLY":
            endpoint.discard_idle()  # Sentinel-managed clients find the new primary on reconnect
        hint = _HINTS.get(code, "see the reply")
        return cast(
            BaseException,
            api.classes.get(code, api.ex.ResponseError)(
                f"RedisTokenBucket {self.key!r} on {endpoint.where}: Redis answered {reply!r}; {hint}. "
                "Raised whatever on_error says: this is a configuration error, not an outage"
            ),
        )

    def _skip(self, breaker: CircuitBreaker, n: float) -> Decision:
        """The breaker is open: decide by ``on_error`` without calling Redis."""
        exc = None
        if callable(self._on_error):
            wait = breaker.retry_in()
            exc = CircuitOpenError(
                f"RedisTokenBucket {self.key!r}: {self._endpoint.where} is skipped for {wait:.3f} s more; the "
                f"circuit breaker opened after {breaker.failures} failed call(s)",
                wait,
            )
        return self._fail(exc, n)

    def _fail(self, exc: BaseException | None, n: float) -> Decision:
        """Apply the ``on_error`` policy to an outage (``exc`` may be None for a built-in policy)."""
        with self._errors_lock:
            self._errors += 1
        n = float(n)
        policy = self._on_error
        if policy == "local":
            local = self._local
            if n > local.capacity:  # more than this process's share of the burst: never, locally
                return Decision(False, 0.0, n / local.rate)
            return local.try_acquire(n)
        if policy == "open":
            return Decision(True, self._capacity - n, 0.0)
        if policy == "closed":
            return Decision(False, 0.0, n / self._rate)
        assert exc is not None and callable(policy)
        decision = policy(exc, n)
        if not isinstance(decision, Decision):
            raise TypeError(f"RedisTokenBucket: on_error callable must return a Decision, got {decision!r}") from exc
        return decision


def ttl_ms(capacity: float, rate: float, tokens: float) -> int:
    """The key TTL the script sets after a decision: ceil(time to full) + 1 s, in ms."""
    return math.ceil((capacity - tokens) / rate * 1000) + 1000
