"""How a failure is told: one line on stderr, or one JSON object on stdout, and the exit code.

Errors carry their exit code and know how to render themselves (:class:`concur.errors.ConcurError`,
``click.ClickException``); this module only chooses the form, and only ``concur.cli.main`` calls it:

* text (default): ``error: file:line:col: message (variable 'x'); hint`` on stderr, one line,
  whatever the message quotes (control characters escaped); click's own usage errors (a bad
  option, a missing file) too, with where to find help -- only a bare group prints its help;
* JSON (the command was given ``--json`` or ``--format json``): on **stdout**, so a program
  that reads stdout always reads JSON::

      {"error": {"code": 2, "type": "UnknownNameError", "message": "...",
                 "location": {"file": "...", "line": 3, "col": 5} | null,
                 "variable": "contxt" | null, "hint": "..." | null}}

An import of an optional dependency that slipped past :func:`concur.extras.need` is turned into
the same one line naming the extra; any other exception is a bug in concur and keeps its traceback.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import click

from ..errors import EXIT_USAGE, MAX_MESSAGE, ConcurError, Location, MissingDependencyError, clip

__all__ = ["error_document", "json_wanted", "missing_dependency", "report"]

_MAX_LINE = 800  # an error line, escapes included


def json_wanted(asked: bool, args: list[str]) -> bool:
    """True when the command asked for JSON: its callback ran (``asked``, the run's
    :class:`~concur.cli.context.Invocation`), or (for an error click raises while parsing, before
    any callback) the words ``--json`` / ``--format json`` are on the command line."""
    if asked:
        return True
    words = args[: args.index("--")] if "--" in args else args
    return (
        "--json" in words
        or "--format=json" in words
        or any(a == "--format" and b == "json" for a, b in itertools.pairwise(words))
    )


def _location(where: Location | None) -> dict[str, Any] | None:
    if where is None:
        return None
    return {"file": where.file, "line": where.line, "col": where.col}


def error_document(exc: ConcurError | click.ClickException) -> dict[str, Any]:
    """The ``{"error": {...}}`` object for ``exc`` (see the module docstring)."""
    if isinstance(exc, ConcurError):
        body = {
            "code": exc.exit_code,
            "type": type(exc).__name__,
            "message": exc.message,
            "location": _location(exc.where),
            "variable": exc.variable,
            "hint": exc.hint,
        }
    else:
        hint = None
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f"'{exc.ctx.command_path} --help' shows the options"
        body = {
            "code": exc.exit_code or EXIT_USAGE,
            "type": type(exc).__name__,
            "message": clip(exc.format_message(), MAX_MESSAGE),
            "location": None,
            "variable": None,
            "hint": hint,
        }
    return {"error": body}


def missing_dependency(exc: ModuleNotFoundError) -> MissingDependencyError | None:
    """The one-line error for an optional dependency that is not installed (None for anything else)."""
    from ..extras import extra_for

    extra = extra_for(exc.name)
    if extra is None:
        return None
    return MissingDependencyError(f"this needs {exc.name}, which is not installed", extra=extra)


def report(exc: ConcurError | click.ClickException, as_json: bool) -> int:
    """Print ``exc`` in the chosen form; return its exit code."""
    from .hints import for_cli
    from .render import printable

    if isinstance(exc, ConcurError):
        exc = for_cli(exc)  # the engine says what to give; the command line says how
    code = exc.exit_code if isinstance(exc, ConcurError) else (exc.exit_code or EXIT_USAGE)
    if as_json:
        click.echo(json.dumps(error_document(exc), indent=2))
    elif isinstance(exc, ConcurError):
        # one line, whatever the message quotes (escaping can lengthen it: clipped again after)
        click.echo(clip(printable(f"error: {exc}"), _MAX_LINE), err=True)
    elif isinstance(exc, click.exceptions.NoArgsIsHelpError):
        exc.show()  # a bare group (`concur`, `concur bench`): its help is the answer
    else:  # click's own errors (bad option, missing file): one line too, naming where help is
        hint = error_document(exc)["error"]["hint"]
        message = clip(exc.format_message(), MAX_MESSAGE)
        message = message.rstrip(".") if hint else message
        click.echo(clip(printable(f"error: {message}" + (f"; {hint}" if hint else "")), _MAX_LINE), err=True)
    return code
