"""A ``concurrent.futures.Future`` that builds its ``Condition`` only when someone waits.

How is this designed, and why?
==============================

Cost. A stock ``Future`` builds a ``threading.Condition`` (an ``RLock``, a waiter
deque and six bound methods) in ``__init__``, takes it in
``set_running_or_notify_cancel`` and again in ``set_result``, where it also runs
the Python-level ``notify_all``. On CPython 3.11 that is about 1.5 µs per item
before anybody looks at the future, plus roughly ten objects per future for the
cyclic garbage collector to walk while a pool's futures are alive. A worker pool
whose tasks take a few microseconds spends more time on its futures than on the
queue (measured in ``docs/t7-worker-queue.md``). Most futures are never waited on
while pending: the submitter collects results after ``join`` or after leaving the
``with`` block, when every future is already finished.

State. ``PoolFuture`` starts with only the three plain fields of a ``Future``
(``_state``, ``_result``, ``_exception``, as class-level defaults, so creating one
is a bare object allocation) and a class-level flag ``_lazy = True``. The
``Condition`` and the ``_waiters`` / ``_done_callbacks`` lists are made on first
access of any of them, by a non-data descriptor that stores them on the instance
(so later accesses are plain attribute reads) and sets ``_lazy = False``. Every
``Future`` method that can wait, register a callback or a waiter
(``result``/``exception`` on a pending future, ``add_done_callback``, ``cancel``,
``concurrent.futures.wait``/``as_completed``) goes through ``_condition`` and so
makes it; from then on the future is exactly a stock ``Future``.

The one lock. While a future is lazy, nobody can be waiting on it or have a
callback on it: both need the ``Condition``. So the worker's transitions
PENDING -> RUNNING -> FINISHED need no notification, only atomicity against a
thread that is making the ``Condition`` at that moment. ``_LAZY_LOCK`` (one plain
``Lock`` for the process) provides it: the descriptor makes the ``Condition``
under it, and a lazy transition checks ``_lazy`` and writes the state under it.
Either the transition happens first (the new observer then sees the new state
under the ``Condition`` it just made) or the ``Condition`` does (the transition
then takes the stock, notifying path). The lock is held for a few bytecodes and
never while calling out, so it cannot deadlock with a future's own ``Condition``.

Worked example. 50,000 items through 4 workers, nobody waiting until the end: the
stock path makes 50,000 Conditions and runs 100,000 Condition acquisitions and
50,000 ``notify_all`` calls; the lazy path makes none and runs 100,000
acquisitions of one plain ``Lock`` (about 0.1 µs each). The submitter's later
``f.result()`` on a finished future reads the state under the same lock and
returns without making a ``Condition``.

Consequences. ``isinstance(f, concurrent.futures.Future)`` holds and every public
method behaves as the stock one: same states, same exceptions, callbacks run once
in the order added, ``wait``/``as_completed`` see the same fields. ``done()``,
``running()``, ``cancelled()`` and ``result()``/``exception()`` on a finished or
cancelled future answer without making the ``Condition``.

Non-goals. Replacing ``Future`` for callers outside the pool (``PoolFuture`` is
returned by ``WorkerPool.submit``; nothing stops other code from using it, but
only the pool's worker is meant to call the ``set_*`` methods, as with any
``Future``); free-threaded CPython (correct there too, since every lazy
transition is under a lock, but not measured).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures._base import (  # the stock Future's own state names
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from typing import Any, TypeVar

__all__ = ["PoolFuture"]

R = TypeVar("R")

# Guards, for every PoolFuture in the process: the ``_lazy`` flag (whether its
# Condition exists) and the state fields while ``_lazy`` is True. Taken for a few
# bytecodes, never around a call into user code or another lock.
_LAZY_LOCK = threading.Lock()

_CANCELLED_STATES = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED})
_DONE_STATES = frozenset({CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED})


def _make_condition(future: PoolFuture[Any]) -> threading.Condition:
    """Give ``future`` its Condition and lists once; returns the Condition."""
    with _LAZY_LOCK:
        fields = vars(future)
        condition = fields.get("_condition")
        if condition is None:
            fields["_waiters"] = []
            fields["_done_callbacks"] = []
            condition = fields["_condition"] = threading.Condition()
            future._lazy = False
        return condition


class _MadeOnFirstUse:
    """Non-data descriptor for ``_condition``, ``_waiters``, ``_done_callbacks``.

    The first access makes all three (``_make_condition``) and stores them on the
    instance, which shadows this descriptor for every later access.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, future: PoolFuture[Any] | None, owner: type | None = None) -> Any:
        if future is None:
            return self
        _make_condition(future)
        return vars(future)[self._name]


class PoolFuture(Future[R]):
    """A ``concurrent.futures.Future`` whose Condition is made only when needed.

    Behaves as the stock ``Future`` for every public method and for
    ``concurrent.futures.wait``/``as_completed``; the worker that runs its item
    moves it PENDING -> RUNNING -> FINISHED without a Condition while nobody has
    asked to wait on it.

    >>> f = PoolFuture()
    >>> f.set_running_or_notify_cancel(), f.set_result(3), f.result()
    (True, None, 3)
    """

    _state: str = PENDING
    _result: Any = None
    _exception: BaseException | None = None
    _lazy = True  # class default; set False on the instance when the Condition is made
    _condition = _MadeOnFirstUse()
    _waiters = _MadeOnFirstUse()
    _done_callbacks = _MadeOnFirstUse()

    # The fields are class defaults, so making one is a bare allocation (the stock
    # __init__ would build the Condition this class exists to avoid).
    __init__ = object.__init__

    # --- the worker's transitions ----------------------------------------------

    def set_running_or_notify_cancel(self) -> bool:
        """As ``Future.set_running_or_notify_cancel``; no Condition while lazy."""
        with _LAZY_LOCK:
            if self._lazy and self._state == PENDING:
                self._state = RUNNING
                return True
        return super().set_running_or_notify_cancel()

    def set_result(self, result: R) -> None:
        """As ``Future.set_result``; no Condition or notification while lazy."""
        with _LAZY_LOCK:
            if self._lazy and (self._state == PENDING or self._state == RUNNING):
                self._result = result
                self._state = FINISHED
                return
        super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        """As ``Future.set_exception``; no Condition or notification while lazy."""
        with _LAZY_LOCK:
            if self._lazy and (self._state == PENDING or self._state == RUNNING):
                self._exception = exception
                self._state = FINISHED
                return
        super().set_exception(exception)

    def run(self, fn: Callable[[Any], R], item: Any) -> bool | None:
        """Worker side, for the pool only: run ``fn(item)`` into this future.

        Returns True if ``fn`` returned, False if it raised (the exception is in
        the future), None if the future was cancelled before it could run. The
        same transitions as ``set_running_or_notify_cancel`` then ``set_result`` or
        ``set_exception``, in one call.
        """
        with _LAZY_LOCK:
            lazy = self._lazy and self._state == PENDING
            if lazy:
                self._state = RUNNING
        if not lazy and not self.set_running_or_notify_cancel():
            return None
        try:
            result = fn(item)
        except BaseException as exc:
            self.set_exception(exc)
            return False
        with _LAZY_LOCK:
            if self._lazy and self._state == RUNNING:
                self._result = result
                self._state = FINISHED
                return True
        self.set_result(result)
        return True

    # --- reads that need no Condition ---------------------------------------------

    def _lazy_state(self) -> str | None:
        """The state while lazy (read under the lock), else None."""
        with _LAZY_LOCK:
            return self._state if self._lazy else None

    def done(self) -> bool:
        """True once finished or cancelled."""
        state = self._lazy_state()
        return super().done() if state is None else state in _DONE_STATES

    def running(self) -> bool:
        """True while the worker runs the item."""
        state = self._lazy_state()
        return super().running() if state is None else state == RUNNING

    def cancelled(self) -> bool:
        """True if cancelled before it ran."""
        state = self._lazy_state()
        return super().cancelled() if state is None else state in _CANCELLED_STATES

    def result(self, timeout: float | None = None) -> R:
        """As ``Future.result``: the value, the task's exception re-raised,
        ``CancelledError``, or ``TimeoutError`` after ``timeout`` seconds."""
        with _LAZY_LOCK:
            finished = self._lazy and self._state == FINISHED
            value, error = self._result, self._exception
        if not finished:
            return super().result(timeout)
        if error:
            try:
                raise error
            finally:  # break the cycle through the traceback, as Future does
                error = None
                self = None  # type: ignore[assignment]
        return value  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """As ``Future.exception``: the task's exception or None, ``CancelledError``,
        or ``TimeoutError`` after ``timeout`` seconds."""
        with _LAZY_LOCK:
            finished = self._lazy and self._state == FINISHED
            error = self._exception
        if not finished:
            return super().exception(timeout)
        return error
