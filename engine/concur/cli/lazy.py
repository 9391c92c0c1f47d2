"""A click group whose sub-commands are imported only when used (click's "Lazily loading subcommands").

``LazyGroup(lazy_subcommands={"sweep": "concur.cli.commands.sweep.command"})`` lists ``sweep`` in
``--help`` and imports its module the first time ``sweep`` is looked up, so ``concur solve`` never
pays for the modules of the other commands (each imports only click at module level; numpy, sympy,
openpyxl and matplotlib are imported inside the functions that need them).

The registry is data: a name and the dotted path of a ``click.Command``. The group itself imports
nothing of concur, so neither ``concur.cli`` nor any command module imports the other: there is no
import cycle between the group and its commands.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """A ``click.Group`` whose ``lazy_subcommands`` (name -> ``"package.module.attribute"``) load on use."""

    def __init__(self, *args: Any, lazy_subcommands: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_subcommands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            return self._lazy_load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _lazy_load(self, cmd_name: str) -> click.Command:
        module_name, attribute = self.lazy_subcommands[cmd_name].rsplit(".", 1)
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_subcommands[cmd_name]} is not a click.Command")  # a bug in the registry
        return command
