"""The solve budget: every question ends within seconds, with an answer or a one-line refusal.

How it is designed, and why
---------------------------
Most questions are answered by closed forms in microseconds, but a goal seek, a bracketed root
or a torn loop evaluates the model again and again, and sympy can take minutes on an unlucky
system. A capacity tool that hangs is as bad as one that lies, so each question runs under a
:class:`Budget`: a wall-clock deadline (default :data:`DEFAULT_SECONDS`, or
``$CONCUR_SOLVE_BUDGET`` seconds) shared by everything the question does.

* Numeric loops call :func:`spend` once per evaluation; past the deadline it raises
  :class:`concur.errors.BudgetError` (exit 3) naming what was being solved and the hint the
  caller gave ("give replicas, or a bound"). A check costs one clock read (~50 ns).
* sympy cannot be asked to stop, so :func:`interruptible` arms an interval timer
  (``SIGALRM``) for the rest of the budget while sympy runs in the main thread; the signal
  raises inside sympy's Python code and the step falls back to numeric methods. Off the main
  thread (a web server calling :func:`concur.solve`) no signal can be used, and sympy runs
  unbounded -- but only when compiling a plan, whose result is cached on disk, and only for
  loops and inversions the fast paths cannot do.

The budget is a :mod:`contextvars` variable, so nested solves (a goal seek's inner evaluations)
share the outer deadline instead of each getting a fresh one.

Worked example: ``concur solve queueing --find load ...`` searching a load whose inner solve
keeps failing spends its 5 s and exits 3 with "could not solve load within the 5 s budget;
give servers or a bound on load", instead of running for minutes.

Non-goals: CPU-time accounting, cancelling work in other threads.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import BudgetError
from ..records import record

__all__ = ["DEFAULT_SECONDS", "Budget", "Interrupted", "budget", "interruptible", "remaining", "spend"]

DEFAULT_SECONDS = 5.0
"""Seconds one question may spend on numeric searches and symbolic work (``$CONCUR_SOLVE_BUDGET``)."""


@record
class Budget:
    """A deadline on :func:`time.monotonic` and the seconds it allowed (for messages)."""

    deadline: float
    seconds: float


_CURRENT: ContextVar[Budget | None] = ContextVar("concur_solve_budget", default=None)


def _default_seconds() -> float:
    try:
        value = float(os.environ.get("CONCUR_SOLVE_BUDGET", DEFAULT_SECONDS))
    except ValueError:
        return DEFAULT_SECONDS
    return value if value > 0 else DEFAULT_SECONDS


@contextmanager
def budget(seconds: float | None = None) -> Iterator[Budget]:
    """Run the block under a budget; an enclosing budget is kept (nested solves share it)."""
    current = _CURRENT.get()
    if current is not None:
        yield current
        return
    secs = _default_seconds() if seconds is None else seconds
    token = _CURRENT.set(Budget(time.monotonic() + secs, secs))
    try:
        yield _CURRENT.get()  # type: ignore[misc]
    finally:
        _CURRENT.reset(token)


def remaining() -> float | None:
    """Seconds left in the current budget (None outside any budget)."""
    current = _CURRENT.get()
    return None if current is None else current.deadline - time.monotonic()


def spend(what: str, hint: str = "") -> None:
    """Raise :class:`BudgetError` when the current budget is spent; ``what`` is being solved."""
    current = _CURRENT.get()
    if current is not None and time.monotonic() > current.deadline:
        raise BudgetError(
            f"could not solve {what} within the {current.seconds:g} s budget",
            hint=hint or "give it directly, or give a tighter bound on it",
        )


class Interrupted(Exception):
    """Raised inside sympy by the budget's timer (never escapes :func:`interruptible`'s caller)."""


@contextmanager
def interruptible() -> Iterator[None]:
    """Let the rest of the budget interrupt the block (main thread only); raises :class:`Interrupted`.

    Used around sympy calls, whose result the caller treats as "no closed form" on interruption.
    """
    left = remaining()
    usable = left is not None and threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if not usable:
        yield
        return
    if left is not None and left <= 0:
        raise Interrupted()

    def on_alarm(signum: int, frame: object) -> None:
        raise Interrupted()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(left or 0.0, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
