"""What one run of ``concur`` was asked that outlives its command: click's ``ctx.obj``.

An :class:`Invocation` is made by :func:`concur.cli.main` for each run (or by the first option
that needs one, when a test invokes the group through click's runner) and handed to every
command's context; the eager ``--json``/``--format json`` and ``--pack-path`` callbacks fill it
before the command runs, and ``main`` reads it to choose how a failure is told. Nothing of it is
kept in a module: two runs in one process (the tests, ``concur serve``'s workers) share nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

__all__ = ["Invocation", "invocation"]


@dataclass
class Invocation:
    """``json_errors``: the command asked for JSON, so an error is one JSON object on stdout;
    ``pack_path``: the ``--pack-path`` folders this run trusts (:func:`concur.lang.library.set_pack_path`)."""

    json_errors: bool = False
    pack_path: tuple[str, ...] = ()


def invocation(ctx: click.Context) -> Invocation:
    """The run's :class:`Invocation` (made on first use)."""
    return ctx.ensure_object(Invocation)
