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
(capacity, rate) and the cost; the reply carries the decision, the tokens left and
the exact retry-after. The SHA1 is computed locally, so the constructor makes no
network call. When the server does not know the script (a restart, a failover,
``SCRIPT FLUSH``: the reply is NOSCRIPT) the bucket loads it once with
``SCRIPT LOAD`` and repeats the ``EVALSHA``; that call costs three round trips,
every later one costs one.

Inside the script:

* the clock is the server's ``TIME`` (integer seconds and microseconds, combined
  into epoch microseconds ~1.8e15, exact in a double, unlike epoch nanoseconds).
  Client clocks differ between hosts; one clock for the whole fleet is the point.
* ``TIME`` is a wall clock and can step back (NTP, failover to a host whose clock
  is behind): negative elapsed time is clamped to zero and the later stamp kept,
  which can under-admit briefly but never mints tokens.
* the rejected path also stores the refilled tokens with the new stamp, together;
  storing only one of them would lose refill (a client rejected in a loop would be
  locked out).
* the key's TTL is set with ``PEXPIRE`` to the time until the bucket is full again,
  rounded up, plus one second. Expiry therefore only removes a bucket that *is*
  full, so "missing means full" stays true; a shorter TTL would hand out a free refill.
* Lua numbers come back from Redis as truncated integers, so fractional values are
  returned as strings and the decision as 1/0.

Worked example. capacity=10, rate=2 request/s, 4 processes each calling
``try_acquire()`` in a loop for 3 s: the fleet admits at most 10 + 2*3 = 16
requests in total, whichever processes win them.

Failure policy. If Redis cannot be reached (connection refused, timeout), ``on_error``
decides: ``"open"`` (default) allows the request (Stripe's advice: a limiter outage
must not take the API down), ``"closed"`` denies it, or a callable
``on_error(exc, n) -> Decision`` decides. ``errors`` counts how often the policy
fired, so it can be alerted on. Other Redis errors (a wrong-type key, a script
error) are raised.

Non-goals. Exactness across a failover (replicas lag; a promoted replica may have
forgotten recent debits and over-admit briefly); fairness between processes; the
blocking ``acquire`` polls with sleeps like the in-process one.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from .token_bucket import Decision, _deadline, validate_cost, validate_policy

__all__ = ["SCRIPT", "SCRIPT_SHA", "RedisTokenBucket"]

SCRIPT = """
-- concur token bucket. KEYS[1]: bucket hash. ARGV: capacity, rate (per s), cost,
-- optional test clock in epoch microseconds (empty in production: server TIME).
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
if tokens == nil or last == nil then
  tokens = capacity
  last = now
end
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
return {allowed, string.format('%.17g', tokens), string.format('%d', retry_us)}
"""

SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()

ErrorPolicy = str | Callable[[BaseException, float], Decision]


class RedisTokenBucket:
    """A token bucket whose state lives in Redis, shared by every process using ``key``.

    ``client``: a ``redis.Redis`` (or anything with ``execute_command``). ``key``: the
    bucket's name; stored as ``f"{prefix}{{{key}}}"``. ``capacity``/``rate``: as for
    ``TokenBucket`` (validated the same way); every user of the key must pass the
    same pair. ``on_error``: ``"open"``, ``"closed"`` or a callable
    ``(exc, n) -> Decision``, used when Redis is unreachable.

    ``try_acquire`` costs one round trip (three when the script must be reloaded).
    Raises ``ValueError`` on bad arguments; Redis errors other than connection
    failures propagate.
    """

    def __init__(
        self,
        client: Any,
        key: str,
        capacity: float,
        rate: float,
        on_error: ErrorPolicy = "open",
        *,
        prefix: str = "concur:tb:",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import redis.exceptions  # the client is a redis-py client: already imported

        self._capacity, self._rate = validate_policy(capacity, rate)
        if self._rate == math.inf:
            raise ValueError(
                "RedisTokenBucket: rate must be finite; an infinite rate needs no limiter"
            )
        if not isinstance(key, str) or not key:
            raise ValueError(
                f"RedisTokenBucket: key must be a non-empty string, got {key!r}"
            )
        if not (callable(on_error) or on_error in ("open", "closed")):
            raise ValueError(
                f"RedisTokenBucket: on_error must be 'open', 'closed' or a callable "
                f"(exc, n) -> Decision, got {on_error!r}"
            )
        self._client = client
        self.key = f"{prefix}{{{key}}}"
        self._on_error = on_error
        self._clock = clock
        self._sleep = sleep
        self._argv = (repr(self._capacity), repr(self._rate))
        self._unreachable = (
            redis.exceptions.ConnectionError,
            redis.exceptions.TimeoutError,
            OSError,
        )
        self._noscript = redis.exceptions.NoScriptError
        self._test_now_us: Callable[[], int] | None = (
            None  # tests only: replaces server TIME
        )
        self.errors = 0  # how often on_error fired; a plain int, read without a lock

    @property
    def capacity(self) -> float:
        """The burst."""
        return self._capacity

    @property
    def rate(self) -> float:
        """Tokens per second."""
        return self._rate

    def load(self) -> str:
        """Load the script into the server's cache now (``SCRIPT LOAD``); returns its SHA1."""
        sha = self._client.execute_command("SCRIPT", "LOAD", SCRIPT)
        return sha.decode() if isinstance(sha, bytes) else str(sha)

    def try_acquire(self, n: float = 1) -> Decision:
        """Debit ``n`` tokens from the shared bucket if available now; never sleeps.

        Returns a ``Decision`` whose ``retry_after`` is rounded up to the server's
        microsecond. Raises ``ValueError`` if ``n <= 0`` or ``n > capacity``.
        """
        n = validate_cost(n, self._capacity)
        args = ["EVALSHA", SCRIPT_SHA, 1, self.key, *self._argv, repr(n)]
        if self._test_now_us is not None:
            args.append(str(self._test_now_us()))
        try:
            try:
                reply = self._client.execute_command(*args)
            except self._noscript:
                self.load()
                reply = self._client.execute_command(*args)
        except self._unreachable as exc:
            return self._fail(exc, n)
        allowed, tokens, retry_us = reply
        return Decision(int(allowed) == 1, float(tokens), int(retry_us) / 1e6)

    def acquire(self, n: float = 1, timeout: float | None = None) -> bool:
        """Block until ``n`` tokens are debited (True) or the timeout would pass (False).

        Same contract as ``TokenBucket.acquire``; the deadline is measured on the local
        ``clock``. With ``on_error="closed"`` and Redis down it waits until the
        timeout; with ``"open"`` it returns True.
        """
        n = validate_cost(n, self._capacity)
        deadline = _deadline(self._clock, timeout)
        while True:
            decision = self.try_acquire(n)
            if decision.allowed:
                return True
            wait = decision.retry_after
            if self._clock() + wait > deadline:
                return False
            self._sleep(wait)

    def _fail(self, exc: BaseException, n: float) -> Decision:
        """Apply the ``on_error`` policy to an unreachable Redis."""
        self.errors += 1
        policy = self._on_error
        if policy == "open":
            return Decision(True, self._capacity - n, 0.0)
        if policy == "closed":
            return Decision(False, 0.0, n / self._rate)
        decision = policy(exc, n)  # type: ignore[operator]
        if not isinstance(decision, Decision):
            raise TypeError(
                f"RedisTokenBucket: on_error callable must return a Decision, got {decision!r}"
            ) from exc
        return decision


def ttl_ms(capacity: float, rate: float, tokens: float) -> int:
    """The key TTL the script sets after a decision: ceil(time to full) + 1 s, in ms."""
    return math.ceil((capacity - tokens) / rate * 1000) + 1000
