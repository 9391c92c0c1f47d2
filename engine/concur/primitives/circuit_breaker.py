"""Circuit breaker: stop calling a dependency that is down, and find out when it is back.

How is this designed, and why?
==============================

A rate limiter in front of an API asks Redis on every request. When Redis is down,
asking costs the caller the whole time budget of the call (a refused connection is
fast, a frozen server or a silent network is not), on *every* request. The breaker
remembers the outage: after one failed call it answers "do not call" at once for a
back-off period, so every further decision costs nothing, and it lets exactly one
call through afterwards (the *probe*) to see whether the dependency is back.

State, guarded by ``_lock``: ``_state`` (closed, open or half-open), ``_until`` (the
clock reading at which the next probe may start) and ``_failures`` (consecutive failed
attempts: the call that opened the breaker plus every failed probe since).

* closed: every call goes through. A failure opens the breaker.
* open: ``allow()`` is False until ``_until``; the first caller after it becomes the
  probe (state half-open) and is allowed.
* half-open: the probe is in flight; everyone else is refused. Its success closes the
  breaker (and resets the back-off); its failure opens it again with a doubled back-off.
  A probe that never reports (its thread was interrupted in a way that skipped the
  report, or the process forked while it ran) holds the state only until ``_until``
  (``cap`` seconds), then another caller probes.

Back-off. The n-th consecutive failure opens the breaker for
``min(cap, base * 2**(n - 1))`` seconds times a random factor in [0.5, 1): "equal
jitter" (Marc Brooker, AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).
The jitter spreads the probes of many processes that saw the same outage at the same
moment, so a recovering server does not get them all at once; keeping at least half of
the back-off keeps a dead server from being probed at once again.

Worked example (base=0.2, cap=5, clock in seconds). Redis dies at t=10. The call at
t=10.000 times out (it cost the caller its budget, say 0.05 s) and opens the breaker
for 0.1..0.2 s, say until t=10.2; 500 decisions in between are refused at once. At
t=10.2 one probe fails: open again for 0.2..0.4 s; then 0.4..0.8, 0.8..1.6, 1.6..3.2,
and from the sixth failure 2.5..5 s. Over a 60 s outage about 20 calls pay the budget (six
in the first 5 s, then one per 3.75 s on average); the rest cost nothing. When Redis
is back, the next probe, at most 5 s later, closes the breaker.

Hot path. ``allow()`` and ``record_success()`` read ``_state`` without the lock when it
is closed. The read can be stale by one call: a thread may send one more call right
after another thread opened the breaker, or refuse one right after a probe closed it.
Both are harmless, and the closed path costs one attribute read instead of a lock. The
counters ``opened`` and ``probes`` are written under the lock and read without it.

Failure policy. The breaker decides nothing about *what* a failure is: the caller
reports ``record_failure()`` only for the outages it wants to ride over (for the Redis
limiter: refused, reset, timed out, "busy"/"loading" replies) and ``record_success()``
whenever the dependency answered, even with an error.

Non-goals. Failure-rate windows or thresholds above one failure (one refused or timed
out call is already evidence enough for a limiter whose budget is tens of
milliseconds); half-open with several concurrent probes; sharing state across processes
(each process learns about the outage by its own first failed call).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

__all__ = ["CircuitBreaker", "CircuitOpenError"]

_CLOSED = "closed"
_OPEN = "open"
_HALF_OPEN = "half-open"


class CircuitOpenError(ConnectionError):
    """The call was not made: the breaker is open. ``retry_in`` is seconds until the next probe."""

    def __init__(self, message: str, retry_in: float) -> None:
        super().__init__(message)
        self.retry_in = retry_in


class CircuitBreaker:
    """Closed / open / half-open breaker with jittered exponential back-off.

    ``base``: seconds the first failure keeps it open (times a factor in [0.5, 1));
    each further consecutive failure doubles it, up to ``cap``. ``clock``: a monotonic
    clock in seconds. ``jitter``: a callable returning a float in [0, 1) (default
    ``random.random``). Thread-safe. Raises ``ValueError`` unless
    ``0 < base <= cap < inf``.

    >>> b = CircuitBreaker(base=1.0, cap=8.0, clock=lambda: 0.0, jitter=lambda: 0.0)
    >>> b.allow(), b.record_failure(), b.state, b.allow()
    (True, None, 'open', False)
    """

    def __init__(
        self,
        base: float = 0.2,
        cap: float = 5.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        base = float(base)
        cap = float(cap)
        if not (0.0 < base <= cap < float("inf")):
            raise ValueError(f"CircuitBreaker: need 0 < base <= cap < inf seconds, got base={base!r}, cap={cap!r}")
        self._base = base
        self._cap = cap
        self._clock = clock
        self._jitter = jitter
        # _lock guards _state, _until, _failures, opened and probes. _state is also read
        # without it on the closed fast path (see the module notes on stale reads).
        self._lock = threading.Lock()
        self._state = _CLOSED
        self._until = 0.0
        self._failures = 0
        self.opened = 0  # how often a failure opened a closed breaker
        self.probes = 0  # how many half-open probes were let through

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"`` (a snapshot, may be stale at once)."""
        return self._state

    @property
    def failures(self) -> int:
        """Consecutive failed attempts since the breaker last closed."""
        return self._failures

    def retry_in(self) -> float:
        """Seconds until the next probe may start (0.0 when closed or already due)."""
        with self._lock:
            if self._state is _CLOSED:
                return 0.0
            return max(0.0, self._until - self._clock())

    def backoff(self, failures: int) -> float:
        """The back-off ceiling after ``failures`` consecutive failures: ``min(cap, base * 2**(failures-1))``."""
        return min(self._cap, self._base * 2.0 ** min(max(failures, 1) - 1, 64))

    def allow(self) -> bool:
        """May the caller call the dependency now? True when closed, and for the one probe."""
        if self._state is _CLOSED:  # unlocked read, see the module notes
            return True
        with self._lock:
            if self._state is _CLOSED:
                return True
            now = self._clock()
            if now < self._until:
                return False
            # open and due, or a half-open probe that never reported: this caller probes
            self._state = _HALF_OPEN
            self._until = now + self._cap
            self.probes += 1
            return True

    def record_success(self) -> None:
        """The dependency answered: close the breaker and reset the back-off."""
        if self._state is _CLOSED:  # unlocked read: nothing to reset
            return
        with self._lock:
            self._state = _CLOSED
            self._failures = 0

    def record_failure(self) -> None:
        """The call failed with an outage: open (or re-open) the breaker.

        While already open, failures of calls that started before it opened are ignored,
        so one outage met by many threads at once doubles the back-off only once.
        """
        with self._lock:
            if self._state is _OPEN:
                return
            if self._state is _CLOSED:
                self.opened += 1
            self._failures += 1
            delay = self.backoff(self._failures) * (0.5 + 0.5 * self._jitter())
            self._state = _OPEN
            self._until = self._clock() + delay
