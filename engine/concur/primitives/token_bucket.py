"""Token bucket: a burst allowance refilled at a sustained rate.

How is this designed, and why?
==============================

State. A bucket holds ``tokens`` (a float, 0 <= tokens <= capacity) and ``last``,
the clock reading at which ``tokens`` was true. Two numbers describe the policy and
they mean different things: ``capacity`` is the *burst* (how much may be spent at
once after a quiet spell), ``rate`` is the *sustained* refill in tokens per second.
Conflating them ("100 per minute" stored as capacity=100, rate=100) is the usual bug.

Lazy refill. Nothing runs in the background. Every call, under one lock, reads the
clock once and credits the time that passed since ``last``::

    tokens = min(capacity, tokens + (now - last) * rate);  last = now

then debits ``n`` if ``tokens >= n``. Refill, check and debit are one critical
section, so no two threads can spend the same token (no over-admission), and a
bucket nobody calls costs nothing. Timer-driven refill (Envoy before 2024) under-fills
when the timer runs late and needs a thread per bucket.

Worked example. capacity=10 request, rate=2 request/s, starting full at t=0:

* t=0: ten calls of ``try_acquire()`` are allowed, tokens 10 -> 0; the eleventh is
  denied with ``retry_after = (1 - 0) / 2 = 0.5`` s (HTTP ``Retry-After: 1``).
* t=0.5: one token has accrued, one call is allowed, tokens 0 again.
* t=3.0: 2.5 s * 2/s = 5 tokens; ``try_acquire(4)`` is allowed, 1 token left;
  ``try_acquire(3)`` is denied with ``retry_after = (3 - 1) / 2 = 1.0`` s.
* ``try_acquire(11)`` can never succeed and raises ``ValueError`` at once; a blocking
  ``acquire(11)`` would otherwise wait forever.

Consequences.

* Window bound: in any window of length T the admitted cost is at most
  ``capacity + rate * T`` (the bucket can be full at the start of the window and
  refills at ``rate`` during it); the long-run average is at most ``rate``.
* ``retry_after = (n - tokens) / rate`` is exact for a caller with no competitor:
  retrying after that many seconds succeeds. Under contention it is a lower bound.
  It is computed so that the float re-check at ``last + retry_after`` passes.
* Time comes from an injected, *monotonic* clock (default ``time.monotonic``).
  Wall clocks jump (NTP steps, manual changes); a step forward would mint a burst of
  free tokens. A reading *earlier* than ``last`` (possible only with a faulty
  injected clock) is clamped: no refill, and ``last`` keeps the later value, which
  can under-admit but never over-admit.
* A float of seconds since boot has a resolution near 1e-10 s, and float tokens
  keep fractions of a token (a 0.3 request/s bucket loses nothing between calls).
* ``rate=math.inf`` is a bucket that never limits (a switched-off limit): it is full
  at every call, *including* calls at the same clock reading. Computed as a refill it
  would need time to pass (``0 * inf`` is NaN), and a frozen or coarse clock would then
  leave it empty with ``retry_after = 0``: a blocking ``acquire`` would spin. NaN is
  refused for capacity, rate, cost and timeout alike.

asyncio. ``AsyncTokenBucket`` wraps the same state and ``try_acquire``. Its
``acquire`` is what an ``async`` caller pays on every request, so the admitted path
(nobody queued, tokens free) is one ``try_acquire`` and nothing else.

When the rate binds, callers wait in one FIFO queue and nothing polls. A caller
that is denied (or that finds others already queued) appends ``[future, cost,
deadline timer]`` to a deque and awaits its future. Exactly one loop timer exists
while anyone waits: it is due when the *head's* tokens are (``retry_after`` of the
head's own decision). When it fires, the timer callback debits tokens for the
head, resolves its future with True, and goes on down the queue while tokens last;
then it arms the single timer for the new head. So each admission costs one
``try_acquire``, one ``set_result`` and at most one timer, whatever the number of
waiters: 1,000 waiting tasks do not wake 1,000 times per token.

Fairness, stated. Admission is strictly first come, first served, measured from the
moment ``acquire`` is called on the loop: a later caller never overtakes an earlier
one, including through ``AsyncTokenBucket.try_acquire``, which is denied while
anyone is queued. The price is head-of-line blocking: a large request at the head
holds back small ones behind it until its tokens accrue (it never starves, and
the throughput is unchanged because tokens keep accruing for the head). Waiting
time is therefore predictable: a caller behind ``Q`` queued tokens is served after
``(Q + n - tokens) / rate`` seconds, and a ``timeout`` shorter than that returns
False at once instead of waiting to fail.

Cancellation and timeouts keep the queue consistent: a cancelled or timed-out
waiter is marked done and skipped (O(1), no search in the deque) and, if it was the
head, the timer is re-armed for the next one at once. A waiter cancelled *after*
its tokens were handed over but before it ran gives them back to the bucket. Only
the loop thread touches the queue; the token state stays under the bucket's lock,
so plain threads may still call ``try_acquire`` (a thread that slips a token in
between a check and an enqueue can delay the head by that token; the per-waiter
deadline timer still ends the wait on time). Waiters stranded on an event loop that
was closed while they waited (never cancelled) are dropped by the next caller, so a
bucket reused on a new loop is not held back by a queue nobody will serve.

Non-goals.

* Fairness for the blocking ``TokenBucket.acquire`` (threads): it polls, sleeping
  ``retry_after`` and trying again; threads are not served first-come-first-served,
  and a large request can be overtaken by small ones. Use the asyncio bucket, or
  put a FIFO queue in front, if order matters.
* Debt. Unlike Guava's ``RateLimiter`` the bucket never lends: tokens never go
  negative and a request is admitted only when it is paid for.
* Live rate changes; warm-up ramps; per-key maps (one bucket per key is the caller's
  dictionary); cross-process limits (see ``redis_bucket``).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "AsyncTokenBucket",
    "Decision",
    "TokenBucket",
    "acquire_deadline",
    "ratelimit_headers",
    "retry_after_header",
    "validate_cost",
    "validate_policy",
]


class Decision(NamedTuple):
    """The outcome of one ``try_acquire``.

    ``allowed``: the cost was debited. ``remaining``: tokens left after the decision
    (a float, never negative). ``retry_after``: seconds until the same request would
    succeed with no competitor (0.0 when allowed).
    """

    allowed: bool
    remaining: float
    retry_after: float


_new_decision = tuple.__new__  # Decision(...) without the NamedTuple __new__ call overhead


def validate_policy(capacity: float, rate: float) -> tuple[float, float]:
    """Check a (capacity, rate) pair and return it as floats.

    Raises ``ValueError`` unless ``1 <= capacity < inf`` and ``0 < rate <= inf``.
    """
    try:
        capacity = float(capacity)
        rate = float(rate)
    except (TypeError, ValueError):
        raise ValueError(
            f"token bucket: capacity and rate must be numbers, got capacity={capacity!r}, rate={rate!r}"
        ) from None
    if not (1.0 <= capacity < math.inf):
        raise ValueError(
            f"token bucket: capacity (the burst) must be a finite number >= 1, got {capacity!r}; "
            "a bucket that cannot hold one token admits nothing"
        )
    if not rate > 0.0:  # also rejects NaN
        raise ValueError(
            f"token bucket: rate (tokens per second) must be > 0, got {rate!r}; "
            "use a large capacity with a tiny rate for a quota that barely refills"
        )
    return capacity, rate


def validate_cost(n: float, capacity: float) -> float:
    """Check a request cost against the capacity and return it as a float.

    Raises ``ValueError`` when ``n <= 0``, is not finite, or exceeds ``capacity``
    (such a request could never be admitted; waiting for it would last forever).
    """
    n = float(n)
    if not 0.0 < n < math.inf:
        raise ValueError(f"token bucket: cost n must be a finite number > 0, got {n!r}")
    if n > capacity:
        raise ValueError(
            f"token bucket: cost n={n:g} exceeds capacity={capacity:g}, so it can never be "
            "admitted; split the request or raise the capacity (the burst)"
        )
    return n


_INF = math.inf


def _retry_after(tokens: float, n: float, rate: float, last: float) -> float:
    """Seconds until ``tokens`` refilled at ``rate`` from ``last`` reach ``n``.

    ``(n - tokens) / rate``, rounded up by a few ulps of the clock reading until the
    refill the bucket will compute at ``last + result`` really reaches ``n``: a caller
    that waits exactly this long is admitted, not told to wait again by rounding.
    """
    if rate == math.inf:
        return 0.0
    target = last + (n - tokens) / rate
    wait = target - last
    for _ in range(64):  # a handful of ulps suffices; the bound only guards the loop
        wait = target - last
        if tokens + ((last + wait) - last) * rate >= n:
            break
        target = math.nextafter(target, math.inf)
    return wait


class TokenBucket:
    """A thread-safe token bucket with an injectable monotonic clock.

    ``capacity``: the burst (tokens the bucket holds, >= 1). ``rate``: tokens added per
    second (> 0, ``math.inf`` allowed). ``clock``: returns seconds, never decreasing
    (default ``time.monotonic``). ``initial``: starting tokens (default full;
    0 starts empty). ``sleep``: used by the blocking ``acquire`` (default
    ``time.sleep``; tests inject a fake that advances the fake clock).

    >>> b = TokenBucket(capacity=2, rate=1, clock=lambda: 0.0)
    >>> b.try_acquire(), b.try_acquire(), b.try_acquire()
    (Decision(allowed=True, remaining=1.0, retry_after=0.0), \
Decision(allowed=True, remaining=0.0, retry_after=0.0), \
Decision(allowed=False, remaining=0.0, retry_after=1.0))
    """

    __slots__ = ("_capacity", "_clock", "_last", "_lock", "_rate", "_sleep", "_tokens")

    def __init__(
        self,
        capacity: float,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        initial: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._capacity, self._rate = validate_policy(capacity, rate)
        self._clock = clock
        self._sleep = sleep
        tokens = self._capacity if initial is None else float(initial)
        if not 0.0 <= tokens <= self._capacity:
            raise ValueError(
                f"token bucket: initial tokens must lie in [0, capacity={self._capacity:g}], got {initial!r}"
            )
        # Guards _tokens and _last: refill, check and debit happen in one critical
        # section so no token is spent twice. Never held while sleeping.
        self._lock = threading.Lock()
        self._tokens = tokens
        self._last = clock()

    @property
    def capacity(self) -> float:
        """The burst: the most tokens the bucket holds."""
        return self._capacity

    @property
    def rate(self) -> float:
        """The sustained refill, tokens per second."""
        return self._rate

    def try_acquire(self, n: float = 1) -> Decision:
        """Debit ``n`` tokens if available now; never blocks.

        Returns a :class:`Decision`. Raises ``ValueError`` if ``n <= 0`` or
        ``n > capacity``.
        """
        if n != 1:
            n = validate_cost(n, self._capacity)
        rate = self._rate
        with self._lock:  # guards _tokens and _last
            now = self._clock()
            last = self._last
            if now > last:
                tokens = self._tokens + (now - last) * rate
                if tokens > self._capacity:  # a comparison, not min(): this is the hot path
                    tokens = self._capacity
                self._last = last = now
            elif rate == _INF:  # an infinite rate refills at once, even in no time at all
                tokens = self._capacity
            else:  # no time passed, or the clock stepped back: clamp, keep the later stamp
                tokens = self._tokens
            if tokens >= n:
                tokens -= n
                self._tokens = tokens
                return _new_decision(Decision, (True, tokens, 0.0))
            self._tokens = tokens
        return _new_decision(Decision, (False, tokens, _retry_after(tokens, n, rate, last)))

    def peek(self, n: float = 1) -> Decision:
        """What ``try_acquire(n)`` would decide now, without debiting anything."""
        n = validate_cost(n, self._capacity)
        with self._lock:
            now = self._clock()
            last = self._last
            tokens = self._tokens
            if self._rate == _INF:
                tokens = self._capacity
            elif now > last:
                tokens = min(self._capacity, tokens + (now - last) * self._rate)
                last = now
        if tokens >= n:
            return Decision(True, tokens - n, 0.0)
        return Decision(False, tokens, _retry_after(tokens, n, self._rate, last))

    def _refund(self, n: float) -> None:
        """Give back ``n`` tokens debited for a caller that will not use them (capped at capacity)."""
        with self._lock:
            tokens = self._tokens + n
            self._tokens = tokens if tokens < self._capacity else self._capacity

    def acquire(self, n: float = 1, timeout: float | None = None) -> bool:
        """Block until ``n`` tokens are debited (True) or the timeout would pass (False).

        ``timeout`` in seconds; ``None`` or ``math.inf`` waits as long as needed,
        0 or negative tries once. Never sleeps past the deadline: when the next
        possible admission lies beyond it, returns False at once. Raises
        ``ValueError`` for a cost that can never be admitted.
        """
        n = validate_cost(n, self._capacity)
        deadline = acquire_deadline(self._clock, timeout)
        while True:
            decision = self.try_acquire(n)
            if decision.allowed:
                return True
            wait = decision.retry_after
            now = self._clock()
            if now + wait > deadline:
                return False
            self._sleep(wait)


def acquire_deadline(clock: Callable[[], float], timeout: float | None) -> float:
    """The clock reading after which a blocking acquire gives up (inf = never)."""
    if timeout is None:
        return math.inf
    timeout = float(timeout)
    if math.isnan(timeout):
        raise ValueError("token bucket: timeout must be a number of seconds or None, got nan")
    return clock() + max(0.0, timeout)


class AsyncTokenBucket:
    """The token bucket for asyncio: same state and decisions, a FIFO awaitable ``acquire``.

    ``clock`` defaults to ``time.monotonic`` (the clock of asyncio's default loops).
    Waits are scheduled on the running loop with ``call_later``, so a test that injects
    a fake ``clock`` runs the bucket on a loop whose ``time()`` is that clock.
    ``try_acquire`` and ``peek`` never suspend, so they are plain methods; ``acquire``
    is a coroutine. The waiter queue belongs to one event loop at a time (the loop of
    the tasks that wait); ``try_acquire`` may also be called from plain threads.

    Invariants (loop thread only): ``_live`` counts the queued waiters whose futures
    are not done and ``_queued`` is the sum of their costs; while ``_live > 0`` exactly
    one timer (``_timer``) is pending, due when the head's tokens are; a queued entry
    whose future is done (admitted, timed out, cancelled) is skipped, never served.
    """

    __slots__ = ("_bucket", "_live", "_queued", "_timer", "_waiters")

    def __init__(
        self,
        capacity: float,
        rate: float,
        clock: Callable[[], float] | None = None,
        *,
        initial: float | None = None,
    ) -> None:
        self._bucket = TokenBucket(capacity, rate, clock or time.monotonic, initial=initial)
        # [future, cost, deadline timer or None, counted in _live/_queued], oldest first
        self._waiters: deque[list[Any]] = deque()
        self._live = 0
        self._queued = 0.0
        self._timer: asyncio.TimerHandle | None = None

    capacity = property(lambda self: self._bucket.capacity, doc="The burst.")
    rate = property(lambda self: self._bucket.rate, doc="Tokens per second.")

    @property
    def waiting(self) -> int:
        """How many ``acquire`` calls are queued now."""
        return self._live

    def try_acquire(self, n: float = 1) -> Decision:
        """Debit ``n`` tokens if available now and nobody is queued; never suspends.

        While waiters are queued it is denied (no barging past the queue), with
        ``retry_after`` the time until the queue ahead and ``n`` are paid for.
        """
        if not self._live or self._abandoned():
            return self._bucket.try_acquire(n)
        return self._behind_queue(self._bucket.peek(n), n)

    def peek(self, n: float = 1) -> Decision:
        """What ``try_acquire(n)`` would decide now, without debiting."""
        decision = self._bucket.peek(n)
        return decision if not self._live or self._abandoned() else self._behind_queue(decision, n)

    def _behind_queue(self, decision: Decision, n: float) -> Decision:
        """A denial for ``n`` queued behind ``_queued`` tokens of waiters."""
        tokens = decision[1] + n if decision[0] else decision[1]
        return Decision(False, tokens, max(0.0, self._queued + n - tokens) / self._bucket.rate)

    async def acquire(self, n: float = 1, timeout: float | None = None) -> bool:
        """Await until ``n`` tokens are debited (True) or the timeout would pass (False).

        First come, first served: a call that finds others waiting queues behind
        them even if tokens are free. ``timeout`` in seconds (``None``/``inf``: as
        long as needed; 0 or less: no wait); returns False at once when the queue
        ahead plus ``n`` cannot be paid for by the deadline. Cancellation while
        queued debits nothing (tokens already handed over are given back).
        """
        bucket = self._bucket
        # the deadline (and a NaN check) only for callers who gave a timeout
        deadline = _INF if timeout is None else acquire_deadline(bucket._clock, timeout)
        if not self._live or self._abandoned():  # nobody queued: the admitted path is one try_acquire
            decision = bucket.try_acquire(n)
            if decision[0]:
                return True
            eta = decision[2]
        else:
            if n != 1:
                n = validate_cost(n, bucket._capacity)
            eta = self._behind_queue(bucket.peek(n), n)[2]
        loop = asyncio.get_running_loop()
        handle = None
        future: asyncio.Future[bool] = loop.create_future()
        entry: list[Any] = [future, n, None, True]
        if deadline < _INF:
            left = deadline - bucket._clock()
            if eta > left:
                return False
            entry[2] = handle = loop.call_later(left, self._expire, entry)
        if not self._live:  # the first waiter: old entries are all done; arm the one timer
            self._waiters.clear()
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(eta, self._wake)
        self._waiters.append(entry)
        self._live += 1
        self._queued += n
        try:
            return await future
        except asyncio.CancelledError:
            if handle is not None:
                handle.cancel()
            if not future.cancelled() and future.result():  # admitted, then cancelled: give back
                bucket._refund(n)
                self._rearm()
            elif future.cancelled():
                self._drop(entry)
            raise

    def _abandoned(self) -> bool:
        """True (and the queue emptied) when the queued waiters belong to an event loop that was
        closed with them still waiting: they will never be served, and must not hold anyone back."""
        waiters = self._waiters
        if not waiters or not waiters[0][0].get_loop().is_closed():
            return False
        for entry in waiters:
            self._uncount(entry)
        waiters.clear()
        self._timer = None
        self._queued = 0.0
        return True

    def _uncount(self, entry: list[Any]) -> None:
        """Take a waiter out of ``_live`` and ``_queued``, once (whoever sees it first)."""
        if entry[3]:
            entry[3] = False
            self._live -= 1
            self._queued -= entry[1]

    def _drop(self, entry: list[Any]) -> None:
        """Forget a waiter that will not be served; re-arm the timer if it was the head."""
        self._uncount(entry)
        if self._waiters and self._waiters[0] is entry:
            self._rearm()

    def _expire(self, entry: list[Any]) -> None:
        """A queued waiter's deadline passed before its tokens were handed over."""
        future = entry[0]
        if not future.done():
            self._rearm()  # serve whoever is due at this very moment first: a tie is admitted
        if not future.done():
            future.set_result(False)
            self._drop(entry)

    def _rearm(self) -> None:
        """The head changed, or tokens came back: decide again now."""
        if self._timer is not None:
            self._timer.cancel()
        self._wake()

    def _wake(self) -> None:
        """Serve the queue from its head while tokens last, then arm one timer for the head."""
        self._timer = None
        waiters = self._waiters
        try_acquire = self._bucket.try_acquire
        while waiters:
            entry = waiters[0]
            future = entry[0]
            if future.done():  # timed out or cancelled (its task may not have run yet)
                self._uncount(entry)
                waiters.popleft()
                continue
            decision = try_acquire(entry[1])
            if not decision[0]:
                self._timer = future.get_loop().call_later(decision[2], self._wake)
                return
            waiters.popleft()
            self._uncount(entry)
            if entry[2] is not None:
                entry[2].cancel()
            future.set_result(True)
        self._queued = 0.0  # no float residue once the queue is empty


def retry_after_header(decision: Decision) -> str:
    """The HTTP ``Retry-After`` value (RFC 9110 §10.2.3): whole seconds, rounded up.

    "0" when allowed; at least "1" when denied, so a client never retries early.

    >>> retry_after_header(Decision(False, 0.2, 0.4))
    '1'
    """
    if decision.allowed:
        return "0"
    return str(max(1, math.ceil(decision.retry_after)))


def ratelimit_headers(decision: Decision, capacity: float, rate: float, *, policy: str = "default") -> dict[str, str]:
    """IETF ``RateLimit-Policy`` and ``RateLimit`` fields (draft-ietf-httpapi-ratelimit-headers).

    Token-bucket mapping: quota ``q`` = capacity, window ``w`` = ceil(capacity/rate)
    seconds; remaining ``r`` = floor(tokens); ``t`` = ceil((capacity - tokens)/rate),
    the seconds until the bucket is full again. A denied decision also gets
    ``Retry-After``, which clients honour in preference to ``RateLimit``.

    >>> ratelimit_headers(Decision(True, 7.5, 0.0), capacity=10, rate=2)
    {'RateLimit-Policy': '"default";q=10;w=5', 'RateLimit': '"default";r=7;t=2'}
    """
    capacity, rate = validate_policy(capacity, rate)
    if not policy or any(c in policy for c in '"\\\r\n'):
        raise ValueError(f"ratelimit_headers: policy name must be plain text, got {policy!r}")
    tokens = min(max(decision.remaining, 0.0), capacity)
    headers = {
        "RateLimit-Policy": f'"{policy}";q={math.floor(capacity)};w={math.ceil(capacity / rate)}',
        "RateLimit": f'"{policy}";r={math.floor(tokens)};t={math.ceil((capacity - tokens) / rate)}',
    }
    if not decision.allowed:
        headers["Retry-After"] = retry_after_header(decision)
    return headers
