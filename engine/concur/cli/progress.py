"""Progress for long commands: a transient bar on stderr when stderr is a terminal, else nothing.

    with progress("solving per point") as bar:
        result = sweep(model, over, given, outputs, progress=bar.update)   # bar.update(done, total)

How it is designed, and why
---------------------------
A command that runs for seconds (a per-point sweep, a simulation, a calibration, a benchmark
stage, a plan search) must show that it is alive wherever a person watches it, and must not
write a byte anywhere a program reads. So the bar goes to **stderr, only when stderr is a
terminal** -- stdout piped to ``tail`` or a file still gets a bar on the terminal, while CI logs
and captured stderr stay clean. The bar is *transient*: it is erased when the block ends, so the
command's own output starts on a clean line.

Invariants: the block covers computation only -- nothing is printed inside it. (stdout is not
redirected through the bar: rich's redirection would send stdout to stderr when stdout is a pipe,
and click writes to the real stdout buffer past it anyway; a benchmark that prints row by row
wraps each row's computation in its own block.) The bar starts at the first report (or at once
with ``eager``), so work that ends without reporting never flashes one; rich is imported
only when a bar is really drawn, so ``concur ... | cat`` and every test run never load it; the
reporter is the same object whether or not a bar is drawn (:class:`Progress`), so callers never
branch; updates are cheap (a bar redraws at most ten times a second in rich's own thread).
An interrupted block (Ctrl-C, an error) stops the bar before the exception goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Progress", "progress", "progress_wanted"]


def progress_wanted() -> bool:
    """True when stderr is a terminal (someone is watching)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


class Progress:
    """Reports work done; draws nothing unless :func:`progress` gave it a bar to start.

    The bar starts at the first :meth:`update` or :meth:`advance`, so work that finishes without
    reporting (a vectorised sweep, a cached answer) never flashes a bar.
    """

    def __init__(self, start: Callable[[], tuple[Any, Any]] | None = None, description: str = "") -> None:
        self._start = start  # builds and starts (rich Progress, task id); None: silent
        self._description = description
        self._bar: Any = None
        self._task: Any = None

    def _running(self) -> bool:
        if self._bar is None and self._start is not None:
            self._bar, self._task = self._start()
            self._bar.update(self._task, description=self._description)
        return self._bar is not None

    def update(self, completed: float, total: float | None = None) -> None:
        """``completed`` of ``total`` units done (``total`` may change between calls)."""
        if self._running():
            self._bar.update(self._task, completed=completed, total=total)

    def advance(self, amount: float = 1.0) -> None:
        if self._running():
            self._bar.advance(self._task, amount)

    def describe(self, text: str) -> None:
        """Change the label shown beside the bar (a benchmark's current stage)."""
        self._description = text
        if self._bar is not None:
            self._bar.update(self._task, description=text)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@contextmanager
def progress(description: str, total: float | None = None, *, eager: bool = False) -> Iterator[Progress]:
    """A :class:`Progress` for the block; a transient bar on stderr when it is a terminal.

    ``total`` may be None (an indeterminate bar) until the first :meth:`Progress.update`.
    ``eager`` shows the bar at once (a stage that reports nothing, such as one benchmark row);
    otherwise it appears at the first report.
    """
    if not progress_wanted():
        yield Progress()
        return

    def start() -> tuple[Any, Any]:
        from rich.console import Console
        from rich.progress import BarColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        task = bar.add_task(description, total=total)
        bar.start()
        return bar, task

    reporter = Progress(start, description)
    if eager:
        reporter.update(0, total)
    try:
        yield reporter
    finally:
        reporter.stop()
