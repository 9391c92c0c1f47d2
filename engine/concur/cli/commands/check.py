"""``concur check``: unit-check packs, a gate for CI and pre-commit.

    $ concur check capacity/                      # text: file:line:col: error: message
    $ concur check --format github capacity/*.yaml   # ::error file=...,line=...,col=...::message
    $ concur check --format json capacity/        # [{"file", "line", "col", "severity", "message"}]

Every problem of every file is reported (not the first per file; :mod:`concur.lang.check`).
Exit 0 when all is consistent, 1 when any problem is found, 2 for a usage error (a path that
does not exist). The report goes to stdout; the one-line summary to stderr, so ``--format json``
output is always exactly one JSON list (``[]`` when clean).

The check imports the YAML loader and the unit tables only -- never sympy, numpy, openpyxl or
matplotlib (a test proves it) -- so the pre-commit hook is fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..context import invocation
from ..options import pack_path_option

__all__ = ["command", "github_annotation"]


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotation(diag: Any) -> str:
    """A GitHub Actions workflow command for ``diag``: ``::error file=F,line=L,col=C::message``.

    >>> from concur.errors import Location
    >>> from concur.lang.check import Diagnostic
    >>> github_annotation(Diagnostic(Location("p.yaml", 7, 5), "cannot add 'a' [s] and 'b' [B]"))
    "::error file=p.yaml,line=7,col=5::cannot add 'a' [s] and 'b' [B]"
    """
    level = "warning" if diag.severity == "warning" else "error"
    where = diag.where
    props = []
    if where is not None:
        props.append(f"file={_escape_property(where.file)}")
        if where.line is not None:
            props.append(f"line={where.line}")
            if where.col is not None:
                props.append(f"col={where.col}")
    return f"::{level}{' ' + ','.join(props) if props else ''}::{_escape_data(diag.message)}"


@contextmanager
def _pint_without_numpy() -> Iterator[None]:
    """Let pint, if a unit not in the cache makes the check import it, load without numpy.

    pint imports numpy whenever it can (0.1-0.2 s, and 70 MB of pages) although the check only
    multiplies floats. Within this command -- a process of its own that never builds arrays --
    numpy is hidden while the check runs, unless it (or pint) is loaded already.
    """
    hide = "numpy" not in sys.modules and "pint" not in sys.modules
    if hide:
        sys.modules["numpy"] = None  # type: ignore[assignment]  # import numpy -> ImportError
    try:
        yield
    finally:
        if hide and sys.modules.get("numpy", 0) is None:
            del sys.modules["numpy"]


def _json_errors(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value == "json":
        invocation(ctx).json_errors = True
    return value


@click.command(name="check")
@pack_path_option
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    is_eager=True,
    callback=_json_errors,
    help="text: file:line:col: error: message; json: a list of {file, line, col, severity, message}; "
    "github: ::error annotations for GitHub Actions",
)
@click.option(
    "--examples/--no-examples",
    default=True,
    show_default=True,
    help="also solve each pack's examples: and report those whose answer differs from what they expect",
)
@click.pass_context
def command(ctx: click.Context, paths: tuple[str, ...], fmt: str, examples: bool) -> None:
    """Unit-check pack files or folders (default: the shipped packs).

    Reports every problem in every file. Exit 0 when clean, 1 on any problem, 2 for a usage
    error such as a path that does not exist.
    """
    from ...lang import checked
    from ...lang.library import formulas_dir, recording
    from ..render import echo, printable

    targets = list(paths) or [str(formulas_dir())]
    files = checked.targets_files(targets)
    diags: list[Any] = []
    if files is not None and checked.run_passed(*files, examples):  # clean before, same bytes everywhere
        count = len(files[0])
    else:
        from ...lang.check import check_catalogs, check_paths
        from ...lang.units import save_cache

        with _pint_without_numpy(), recording() as reads:
            diags, count = check_paths(targets)
            diags += check_catalogs(targets)
            if examples:  # a pack's examples are checks too: solved, and compared with what they expect
                from ...solver.examples import example_diagnostics

                diags += example_diagnostics(targets, skip={d.where.file for d in diags if d.where is not None})
        save_cache()
        if not diags and files is not None:
            checked.remember_run(*files, examples, reads)
    if fmt == "json":
        click.echo(json.dumps([d.to_json() for d in diags], indent=2))
    else:
        for d in diags:
            echo(github_annotation(d) if fmt == "github" else printable(str(d)))  # one diagnostic, one line
    if diags:
        click.echo(f"{len(diags)} problem(s) in {count} pack(s)", err=True)
        ctx.exit(1)
    click.echo(f"ok: {count} pack(s) unit-consistent", err=fmt == "json")
