"""Options several commands share, declared once: ``--pack-path``, ``--json``, ``--set``, ``--find``.

``--json`` does two things: the command prints one JSON document on stdout, and an error, if one
happens, is printed as one JSON object on stdout too (:mod:`concur.cli.report`), so a program
reading stdout always gets JSON. The flag's callback records it in the run's
:class:`~concur.cli.context.Invocation` (``ctx.obj``) before the command runs; so does
``--pack-path``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from .context import invocation

__all__ = ["find_option", "json_option", "pack_path_option", "set_option"]

F = TypeVar("F", bound=Callable[..., Any])


def _set_pack_path(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    from ..lang.places import set_pack_path

    set_pack_path(value)
    invocation(ctx).pack_path = tuple(value)


def pack_path_option(fn: F) -> F:
    """``--pack-path DIR`` (repeatable, eager): more folders where packs are found and ``uses:`` may reach."""
    return click.option(
        "--pack-path",
        "pack_path",
        multiple=True,
        metavar="DIR",
        expose_value=False,
        is_eager=True,
        callback=_set_pack_path,
        type=click.Path(file_okay=False),
        help="also find packs in DIR, and let a pack's uses: reach files there (repeatable)",
    )(fn)


def _json_errors(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        invocation(ctx).json_errors = True
    return value


def json_option(fn: F) -> F:
    """``--json``: print one JSON object (errors too), exposed as ``as_json``."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=_json_errors,
        help='print one JSON object on stdout (an error too: {"error": {...}})',
    )(fn)


def set_option(
    help: str = "a given value ('8192 token', '4 GiB', 0.9) or a preset (model=llama-3.1-70b)",
) -> Callable[[F], F]:
    """``--set/-s NAME=VALUE`` (repeatable), exposed as ``sets``."""
    return click.option("--set", "-s", "sets", multiple=True, metavar="NAME=VALUE", help=help)


def find_option(required: bool = False, help: str = "variable(s) to solve for (VAR or VAR,VAR)") -> Callable[[F], F]:
    """``--find/-f VAR[,VAR]`` (repeatable), exposed as ``find``."""
    return click.option("--find", "-f", "find", multiple=True, required=required, metavar="VAR[,VAR]", help=help)
