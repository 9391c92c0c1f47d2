"""``concur export``: solve a scenario and write it as a live ``.xlsx`` workbook.

Two forms:

* ``concur export [PACK...] [--scenario FILE] [--find X] [--set NAME=VALUE] -o FILE.xlsx``
  solves exactly like ``concur solve`` and writes the solution's workbook;
* ``concur export workbooks/NAME.yaml`` reads a *workbook definition* and
  writes ``workbooks/NAME.xlsx`` beside it (``-o`` overrides the path).

A workbook definition's format and invariants are documented in :mod:`concur.excel.definition`,
which reads, solves and writes it; this command only reads options and prints. Errors are
:class:`concur.errors.UsageError` (exit 2, one line); the file is written atomically, so a failure
leaves no partial file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ...errors import UsageError
from ..options import find_option, json_option, pack_path_option, set_option

__all__ = ["command"]


@click.command("export")
@pack_path_option
@click.argument("packs", nargs=-1)
@find_option()
@set_option()
@click.option(
    "--scenario",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE|-",
    help="YAML file with given: {NAME: VALUE} ('-': stdin)",
)
@click.option("--title", default=None, help="workbook title (default: the packs' names)")
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    metavar="FILE.xlsx|-",
    help="the .xlsx to write (required unless the argument is a workbook definition; '-': stdout, not a terminal)",
)
@click.option(
    "--search-up-to",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="a searched count (replicas, servers) is picked live from candidates up to N "
    "(default: 4x the answer, at least 16 rows); past N the sheet says 'out of range'",
)
@json_option
def command(
    packs: tuple[str, ...],
    find: tuple[str, ...],
    sets: tuple[str, ...],
    scenario: str | None,
    title: str | None,
    output: str | None,
    search_up_to: int | None,
    as_json: bool,
) -> None:
    """Solve and write a live Excel workbook (every result a formula).

    \b
    concur export llm_memory --find users --set model=llama-3.1-70b --set tp=4 -o cap.xlsx
    concur export workbooks/llm_capacity.yaml      (writes workbooks/llm_capacity.xlsx)
    """
    from ...extras import need
    from ..streams import binary_output, is_stdio

    need("openpyxl", "concur export")  # before any solving: the one line naming concur[excel]
    if output is not None and not is_stdio(output) and not output.lower().endswith(".xlsx"):
        raise UsageError(f"output '{output}' must end in .xlsx", hint="e.g. -o plan.xlsx, or -o - for stdout")
    if as_json and is_stdio(output):
        raise UsageError("-o - and --json would both write stdout", hint="write the workbook to a file")
    if len(packs) == 1 and packs[0].endswith((".yaml", ".yml")) and not find and not sets and not scenario:
        path = Path(packs[0])
        from ...excel.definition import export_definition, is_definition, load_definition

        if path.is_file() and is_definition(path):
            defn = load_definition(path)
            target = output or _beside(defn.path)
            with binary_output(target, ".xlsx") as staged:
                export_definition(defn, staged, search_up_to)
            _save_caches(None)
            _report(as_json, target, defn.title, list(defn.packs), list(defn.find))
            return
    if output is None:
        raise UsageError("no output file", hint="add -o FILE.xlsx (or -o - for stdout)")
    from ...excel.from_solution import plan_from_solution
    from ...excel.writer import write_workbook
    from ..givens import solve_question

    sol = solve_question(packs, find, sets, scenario)
    model = sol.model
    plan = plan_from_solution(sol, title or " + ".join(model.pack_names), search_up_to=search_up_to)
    with binary_output(output, ".xlsx") as staged:
        write_workbook(plan, staged)
    _save_caches(model)
    _report(as_json, output, plan.title, list(model.pack_names), list(sol.find))


def _report(as_json: bool, written: str, title: str, packs: list[str], find: list[str]) -> None:
    """What was written: a line, or (``--json``) ``{"wrote", "title", "packs", "find"}``; nothing for stdout."""
    from ..streams import is_stdio

    if as_json:
        click.echo(json.dumps({"wrote": written, "title": title, "packs": packs, "find": find}, indent=2))
    elif not is_stdio(written):
        click.echo(f"wrote {written}")


def _save_caches(model: Any) -> None:
    from ...solver.question import flush_caches

    if model is not None:
        flush_caches(model)


def _beside(definition: Path) -> str:
    """The workbook a definition writes when no ``-o`` names one: ``NAME.xlsx`` beside it, and only
    as a regular file (or a new one). A link planted there (a definition's folder comes from a
    checkout, ``concur export`` runs in CI) would otherwise be written through to wherever it
    points; a path the user names with ``-o`` is followed as every output path is."""
    target = definition.with_suffix(".xlsx")
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise UsageError(
            f"cannot write '{target}': it is not a regular file (a link or a device beside the definition)",
            hint=f"remove it, or name the output yourself: -o {target}",
        )
    return str(target)
