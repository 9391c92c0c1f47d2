"""The ``concur`` command line: the group, its lazily loaded commands, and the one place that exits.

Layout: each command is a module of :mod:`concur.cli.commands` defining ``command``, named in
:data:`COMMANDS` and imported only when invoked (:class:`concur.cli.lazy.LazyGroup`), so a warm
``concur solve`` imports click and the solve path, nothing else. Shared pieces are modules beside
this one -- :mod:`~concur.cli.givens` (``--set``, scenarios, ``solve_question``),
:mod:`~concur.cli.render` (escaping, tables), :mod:`~concur.cli.streams` (``-`` for stdin/stdout,
atomic files), :mod:`~concur.cli.tabular` (columns to CSV and summarised tables),
:mod:`~concur.cli.progress`, :mod:`~concur.cli.options`, :mod:`~concur.cli.report` -- and no
command imports this package's ``__init__``: the dependency runs one way.

Only :func:`main` prints a failure or exits. Every :class:`concur.errors.ConcurError` becomes one
line on stderr (or one JSON object on stdout under ``--json``) and its exit code: 0 ok, 1 check
failed, 2 usage/input, 3 impossible scenario. A closed pipe (``concur sweep ... | head``) ends
quietly with 0. A traceback means a bug in concur.
"""

from __future__ import annotations

import errno
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from ..errors import ConcurError
from .lazy import LazyGroup

if TYPE_CHECKING:
    from .context import Invocation

__all__ = ["COMMANDS", "cli", "main"]

# name -> the click.Command to import on first use
COMMANDS = {
    name: f"concur.cli.commands.{module}.command"
    for name, module in {
        "solve": "solve",
        "list": "list",
        "show": "show",
        "check": "check",
        "sweep": "sweep",
        "export": "export",
        "plan": "plan",
        "simulate": "simulate",
        "diagnose": "diagnose",
        "remedies": "remedies",
        "calibrate": "calibrate",
        "bench": "bench",
        "serve": "serve",
    }.items()
}


class _Group(LazyGroup):
    """The root group: a closed stdout pipe ends the command quietly (click alone would exit 1), and
    an engine error leaves with its remedy in the command line's words (:mod:`concur.cli.hints`),
    however the group was invoked (``main``, or click's test runner)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ConcurError as exc:  # before OSError: a BudgetError is a TimeoutError
            from .hints import for_cli

            for_cli(exc)
            raise
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            _quiet_broken_pipe()
            raise click.exceptions.Exit(0) from None


@click.group(
    cls=_Group,
    lazy_subcommands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(None, "-V", "--version", package_name="concur")
def cli() -> None:
    """Capacity questions for concurrent systems, answered from unit-checked equations.

    \b
    concur solve --find users --set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=4
    concur solve --find replicas            (the embedded default scenario)
    concur check formulas/                  (unit-check packs, for CI)

    A bare number means the unit 'concur show PACK' prints for that variable; '-' as a file
    name is stdin or stdout. Exit codes: 0 ok, 1 check failed, 2 usage, 3 impossible.
    """


def _quiet_broken_pipe() -> None:
    """stdout's reader went away (``| head``): point stdout at /dev/null so the final flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the program is so that cleanup runs as for Ctrl-C (not a
    KeyboardInterrupt, which click turns into "aborted", exit 130: a termination exits 143)."""


@contextmanager
def _terminate_like_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP unwind the stack like Ctrl-C does: every ``finally``
    runs, so a file being written (``.grid.csv.<pid>.tmp``) is removed, not left behind. The
    previous handlers come back afterwards (``main`` called in-process leaves no trace). Only the
    main thread can set handlers; elsewhere the defaults stay."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
        raise _Terminated()

    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    previous = {n: signal.signal(getattr(signal, n), stop) for n in names}
    try:
        yield
    finally:
        for n, handler in previous.items():
            signal.signal(getattr(signal, n), handler)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI; map concur errors to one line (or one JSON object) and an exit code."""
    from .context import Invocation

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        _run(args, Invocation())  # this run's ctx.obj: what --json and --pack-path asked
    finally:
        if argv is None:  # the process's own command, about to exit: not main() called in-process
            gc.freeze()  # interpreter exit then skips a full collection over every object (~10 % of a warm solve)


def _run(args: list[str], run: Invocation) -> None:
    """The command ``args`` under the invocation context ``run``; exits (:class:`SystemExit`) with its code."""
    from ..errors import ConcurError
    from . import report

    try:
        with _terminate_like_interrupt():
            code = cli.main(args=args, prog_name="concur", standalone_mode=False, obj=run)  # ctx.exit(n), or None
            sys.stdout.flush()  # a pipe closed after the last write fails here, not at interpreter exit
    except (ConcurError, click.ClickException) as exc:
        sys.exit(report.report(exc, report.json_wanted(run.json_errors, args)))
    except ModuleNotFoundError as exc:
        missing = report.missing_dependency(exc)
        if missing is None:
            raise
        sys.exit(report.report(missing, report.json_wanted(run.json_errors, args)))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except _Terminated:
        sys.exit(143)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        _quiet_broken_pipe()
        code = 0
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
