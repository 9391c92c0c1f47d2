"""The solve budget: a question's work is counted, so the same question gives the same answer (or
the same refusal) on any machine under any load.

How it is designed, and why
---------------------------
Most questions are answered by closed forms in microseconds, but a goal seek, a bracketed root
or a torn loop evaluates the model again and again, and sympy can take minutes on an unlucky
system. A capacity tool that hangs is as bad as one that lies; one whose answer depends on how
busy the machine is, is worse than both. So each question runs under a :class:`Budget` of
*steps*, not seconds:

* Numeric loops call :func:`spend` once per evaluation (a scan point, a bisection, a trial of a
  goal seek, a column of an elimination). Past :data:`DEFAULT_STEPS` (or ``$CONCUR_SOLVE_BUDGET``
  steps) it raises :class:`concur.errors.BudgetError` (exit 3) naming what was being solved and the
  hint the caller gave ("give replicas, or a bound"). Nested solves (a goal seek's inner
  evaluations) share the outer count: a :mod:`contextvars` variable holds it.
* Compiling a plan (structural work, bounded by the packs' size and cached) spends no steps, so
  a warm cache never turns a refusal into an answer or back.
* sympy cannot count its own work, so it is only *attempted* on systems small enough by a
  structural measure (:mod:`concur.solver.closed_forms`: expression size and a degree bound);
  the rest take the numeric paths directly. What was tried never depends on the clock.
* One wall-clock limit remains, as a safety net far above any normal question
  (:data:`SAFETY_SECONDS`, ``$CONCUR_SOLVE_SECONDS``): a question that reaches it is refused with
  an error that says how to raise it -- it never changes which path a question takes. sympy is
  interrupted by ``SIGALRM`` at that limit (:func:`interruptible`, main thread only).

Worked example: ``concur solve queueing --find load ...`` searching a load whose inner solve
keeps failing spends its steps and exits 3 with "could not solve load within the solve budget of
200000 steps; give servers or a bound on load" -- after the same number of evaluations on a
laptop and on a loaded CI runner.

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
from dataclasses import dataclass

from ..errors import BudgetError

__all__ = [
    "DEFAULT_STEPS",
    "SAFETY_SECONDS",
    "Budget",
    "Interrupted",
    "budget",
    "interruptible",
    "spend",
    "spent",
    "timed_out",
]

DEFAULT_STEPS = 200_000
"""Evaluations one question may spend on numeric searches (``$CONCUR_SOLVE_BUDGET``). The
heaviest shipped example (a fleet goal seek over a torn loop) spends about 4,500; a step costs
about 25 µs, so the whole budget is seconds of CPU."""
SAFETY_SECONDS = 60.0
"""The wall-clock safety net (``$CONCUR_SOLVE_SECONDS``): never reached by a normal question."""


@dataclass
class Budget:
    """Steps allowed and spent, and the safety net's deadline on :func:`time.monotonic`."""

    steps: int
    deadline: float
    seconds: float
    used: int = 0


_CURRENT: ContextVar[Budget | None] = ContextVar("concur_solve_budget", default=None)


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


@contextmanager
def budget(steps: int | None = None, seconds: float | None = None) -> Iterator[Budget]:
    """Run the block under a budget; an enclosing budget is kept (nested solves share it)."""
    current = _CURRENT.get()
    if current is not None:
        yield current
        return
    n = int(_env_number("CONCUR_SOLVE_BUDGET", DEFAULT_STEPS)) if steps is None else steps
    secs = _env_number("CONCUR_SOLVE_SECONDS", SAFETY_SECONDS) if seconds is None else seconds
    made = Budget(n, time.monotonic() + secs, secs)
    token = _CURRENT.set(made)
    try:
        yield made
    finally:
        _CURRENT.reset(token)


def spent() -> int:
    """Steps spent so far in the current budget (0 outside any budget)."""
    current = _CURRENT.get()
    return 0 if current is None else current.used


def spend(what: str, hint: str = "") -> None:
    """Count one step; raise :class:`BudgetError` past the budget's steps (or its safety net)."""
    current = _CURRENT.get()
    if current is None:
        return
    current.used += 1
    if current.used > current.steps:
        raise BudgetError(
            f"could not solve {what} within the solve budget of {current.steps} steps",
            hint=(hint or "give it directly, or give a tighter bound on it")
            + "; or raise the budget with CONCUR_SOLVE_BUDGET=<steps>",
        )
    if not current.used & 63 and time.monotonic() > current.deadline:
        raise timed_out(what)


def timed_out(what: str) -> BudgetError:
    """The safety net's refusal: the wall-clock limit was reached (never a path decision)."""
    current = _CURRENT.get()
    seconds = SAFETY_SECONDS if current is None else current.seconds
    return BudgetError(
        f"could not solve {what} within the {seconds:g} s safety limit",
        hint=f"raise it with CONCUR_SOLVE_SECONDS=<seconds> (now {seconds:g}), or give it directly",
    )


class Interrupted(Exception):
    """Raised inside sympy by the safety net's timer; callers turn it into :func:`timed_out`."""


@contextmanager
def interruptible() -> Iterator[None]:
    """Let the safety net interrupt the block (main thread only); raises :class:`Interrupted`."""
    current = _CURRENT.get()
    left = None if current is None else current.deadline - time.monotonic()
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
