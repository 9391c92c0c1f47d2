"""The ``concur`` command line.

Only this module prints or exits. Every :class:`concur.errors.ConcurError`
becomes one line on stderr and its exit code (0 ok, 1 check failed,
2 usage/input, 3 impossible scenario); a traceback means a bug in concur.

Text that comes from packs (docs, names, units, equations, messages quoting them)
reaches the terminal only through :func:`echo`, which escapes control and format
characters (:func:`printable`): a pack cannot move the cursor, clear the screen or
reorder text to fake an "ok".
Sub-commands other than the core ones live in :mod:`concur.cli.commands` and
:mod:`concur.bench` and are imported only when invoked.
"""

from __future__ import annotations

import importlib
import json
import sys
import unicodedata
from typing import Any, TypeVar

import click

from ..errors import EXIT_USAGE, ConcurError, UnderdeterminedError, UsageError

__all__ = ["main", "cli", "printable", "echo"]

_C = TypeVar("_C", bound=click.Command)
# Commands that read packs by name or path take --pack-path (added on first use for lazy ones).
PACK_PATH_COMMANDS = ("solve", "check", "show", "sweep", "export")

# name -> module defining `command`; imported on first use so `concur --help` stays fast.
COMMANDS = {
    "sweep": "concur.cli.commands.sweep",
    "export": "concur.cli.commands.export",
    "simulate": "concur.cli.commands.simulate",
    "diagnose": "concur.cli.commands.diagnose",
    "remedies": "concur.cli.commands.remedies",
    "calibrate": "concur.cli.commands.calibrate",
}


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with control and format characters escaped (``\\x1b``, ``\\u202e``).

    C0/C1 controls (ESC, CR, BEL, DEL...), Unicode format characters (bidi overrides,
    zero-width marks) and line/paragraph separators are shown as escapes, so text from a
    pack can neither drive the terminal nor disguise itself. ``newlines=True`` keeps ``\\n``.
    """
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (ch == "\n" and newlines) or unicodedata.category(ch) == "Zs":  # spaces are harmless
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def echo(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` (lines kept, everything else :func:`printable`): the one way pack text is printed."""
    click.echo(printable(text, newlines=True), err=err)


def _set_pack_path(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    from ..lang.library import set_pack_path

    set_pack_path(value)


def with_pack_path(command: _C) -> _C:
    """Give ``command`` the ``--pack-path DIR`` option (idempotent)."""
    if not any(p.name == "pack_path" for p in command.params):
        command.params.append(click.Option(
            ["--pack-path", "pack_path"], multiple=True, metavar="DIR", expose_value=False, is_eager=True,
            callback=_set_pack_path, type=click.Path(file_okay=False),
            help="also find packs in DIR, and let a pack's uses: reach files there (repeatable)"))
    return command


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        from importlib.util import find_spec

        extra = [n for n, mod in COMMANDS.items() if find_spec(mod) is not None]
        return sorted(set(super().list_commands(ctx)) | set(extra))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in COMMANDS:
            return cmd
        try:
            command: click.Command = importlib.import_module(COMMANDS[name]).command
        except ModuleNotFoundError:
            return None
        return with_pack_path(command) if name in PACK_PATH_COMMANDS else command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="concur")
def cli() -> None:
    """Capacity questions for concurrent systems, answered from unit-checked equations.

    \b
    concur solve --find users --set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=4
    concur solve --find replicas            (the embedded default scenario)
    concur check formulas/                  (unit-check packs, for CI)
    """


def parse_sets(items: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs; a plain number stays a number (the variable's declared unit)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set '{item}' is not NAME=VALUE", hint="e.g. --set context=\"8192 token\"")
        name, value = item.split("=", 1)
        name, value = name.strip(), value.strip()
        if not name:
            raise UsageError(f"--set '{item}' has no name")
        try:
            number = float(value.replace("_", ""))
            out[name] = int(number) if number.is_integer() and "." not in value and "e" not in value.lower() \
                else number
        except ValueError:
            out[name] = value
    return out


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return tuple(out)


def load_scenario(path: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """A scenario file: ``given:`` values, optional ``packs:`` and ``find:``.

    Read like a pack (a regular file, size, depth and node limits: a FIFO or ``/dev/zero`` is
    refused at once); every problem is a :class:`UsageError` (exit 2). ``packs:`` entries
    resolve like a pack's ``uses:``, relative to the scenario's folder (returned as paths).
    """
    from pathlib import Path

    from ..errors import PackError
    from ..lang.library import find_used_pack
    from ..lang.yamlsafe import YList, YMap, load_yaml

    try:
        data = load_yaml(path)
    except PackError as exc:  # a scenario is the user's input: exit 2, not a failed check
        raise UsageError(exc.render_body(), where=exc.where) from None
    if not isinstance(data, YMap) or not isinstance(data.get("given", {}), dict):
        raise UsageError(f"{path}: a scenario is a mapping with given: {{NAME: VALUE}}")
    packs = data.get("packs") or []
    find = data.get("find") or []
    if isinstance(packs, str):
        packs = [packs]
    if isinstance(find, str):
        find = [f.strip() for f in find.split(",")]
    for key, value in (("packs", packs), ("find", find)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{data.where(key)}: '{key}' must be a name or a list of names")
    places = packs.where if isinstance(packs, YList) else (lambda i: data.where("packs"))
    try:
        packs = [str(find_used_pack(ref, Path(path).parent, where=places(i))) for i, ref in enumerate(packs)]
    except PackError as exc:
        raise UsageError(exc.render_body(), where=exc.where) from None
    given = data.get("given") or {}
    for name, value in given.items():
        if not isinstance(value, (int, float, str)) or isinstance(value, bool):
            where = given.where(name) if isinstance(given, YMap) else path
            raise UsageError(f"{where}: '{name}' must be a number or text such as '8192 token'")
    return dict(given), list(packs), list(find)


def default_scenario(packs: list[str]) -> dict[str, Any]:
    """The merged ``scenario:`` blocks of the packs in play (top pack wins)."""
    from ..lang.model import build_model

    merged: dict[str, Any] = {}
    for pack in reversed(build_model(packs).packs):
        merged.update(pack.scenario)
    return merged


def format_value(value: Any, unit: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        text = f"{int(value):,}"
    else:
        text = f"{value:,.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.4g}"
    return f"{text} {unit}".strip()


def render_table(sol: Any, explain: bool) -> str:
    """Aligned rows ``name  value unit  <- derivation``; with ``explain`` the whole trace."""
    rows: list[tuple[str, str, str]] = []
    by_var = {s.variable: s for s in sol.trace}
    for name, res in sol.results().items():
        step = by_var.get(name)
        how = ""
        if step is not None:
            if step.method in ("search", "integer tear"):
                how = step.note
            elif step.eq is not None:
                how = f"{sol.equation_text(step)}  [{sol.where(step)}]"
            else:
                how = str(step.method)
        rows.append((name, format_value(res["value"], res["unit"]), how))
    lines = _align(rows)
    if explain:
        lines.append("")
        lines.append("derivation (in order):")
        steps = []
        for s in sol.trace:
            var = sol.model.variables[s.variable]
            value = var.choices[int(s.value)] if var.choices else s.value / var.display.factor
            detail = sol.equation_text(s) or s.note or str(s.method)
            if s.method in ("given", "preset", "default"):
                detail = s.note if s.method == "preset" and s.note else str(s.method)
            elif s.note:
                detail += f"  ({s.note})"
            steps.append((f"  {s.variable}", format_value(value, var.display.text), detail))
        lines.extend(_align(steps))
    shown = {r[2] for r in rows}
    for note in sol.notes:
        if note not in shown:
            lines.append(f"note: {note}")
    return "\n".join(lines)


def _align(rows: list[tuple[str, str, str]]) -> list[str]:
    if not rows:
        return []
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return [f"{a:<{w0}}  {b:>{w1}}  {c}".rstrip() for a, b, c in rows]


def solve_question(packs: tuple[str, ...], find: tuple[str, ...], sets: tuple[str, ...], scenario: str | None,
                   *, default_find: tuple[str, ...] = ()) -> Any:
    """The one path from command-line words to a :class:`concur.solver.question.Solution` (solve, export).

    Givens come from the scenario file, then ``--set`` (which wins); packs from the arguments,
    else the scenario, else the shipped packs declaring the targets; with neither ``--set``
    nor a scenario the packs' embedded scenario is used. Throughput questions must fix the
    four variables (:mod:`concur.solver.throughput_inputs`). Caches are saved after a successful solve.
    """
    from ..api import packs_for, solve

    given: dict[str, Any] = {}
    pack_list = list(packs)
    targets = _split(find)
    if find and not targets:
        raise UsageError("--find names no variable", hint="e.g. --find users")
    embedded = scenario == "default" or (not sets and not scenario)
    if scenario and scenario != "default":
        s_given, s_packs, s_find = load_scenario(scenario)
        given.update(s_given)
        pack_list = pack_list or s_packs
        targets = targets or tuple(s_find)
    if not targets:
        targets = default_find if not pack_list else ()
        if not targets:
            raise UsageError("nothing to solve for", hint="add --find VARIABLE")
    if not pack_list:
        pack_list = packs_for(targets)
    if embedded:
        given = default_scenario(pack_list)
    given.update(parse_sets(sets))
    try:
        return solve(targets, given, pack_list)
    except UnderdeterminedError as exc:
        raise with_flags(exc, scenario_hint=not embedded and bool(default_scenario(pack_list))) from None


def with_flags(exc: UnderdeterminedError, *, scenario_hint: bool = False) -> UnderdeterminedError:
    """The engine's refusal as the command line says it: the ``--set`` that fixes a throughput
    question, and (where the packs embed a scenario) how to start from it."""
    from ..solver.throughput_inputs import UnfixedThroughputError

    parts = [exc.hint] if exc.hint else []
    if isinstance(exc, UnfixedThroughputError):
        parts.append("give " + " ".join(f"--set {n}=..." for n in exc.missing) + " (or sweep one with --over)")
    elif scenario_hint:
        parts.append("or start from the embedded scenario: --scenario default --set NAME=VALUE")
    else:
        return exc
    return type(exc)(exc.message, missing=exc.missing, hint="; ".join(parts), where=exc.where, variable=exc.variable)


@with_pack_path
@cli.command()
@click.argument("packs", nargs=-1)
@click.option("--find", "-f", "find", multiple=True, help="variable(s) to solve for (VAR or VAR,VAR)")
@click.option("--set", "-s", "sets", multiple=True, metavar="NAME=VALUE",
              help="a given value ('8192 token', '4 GiB', 0.9) or a preset (model=llama-3.1-70b)")
@click.option("--scenario", help="YAML file with given: {NAME: VALUE}, or 'default' for the packs' embedded "
              "scenario (then --set overrides it)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--explain", is_flag=True, help="print the whole derivation")
def solve(packs: tuple[str, ...], find: tuple[str, ...], sets: tuple[str, ...], scenario: str | None,
          as_json: bool, explain: bool) -> None:
    """Solve the packs for the --find variables from the givens.

    Without PACK, the smallest shipped pack declaring every target is used.
    With no --set and no --scenario, the packs' embedded default scenario is solved;
    --scenario default starts from it and lets --set change some of its values.
    """
    sol = solve_question(packs, find, sets, scenario, default_find=("users",))
    if as_json:
        click.echo(json.dumps(sol.to_json(), indent=2))  # json escapes control characters itself
    else:
        echo(render_table(sol, explain))


@cli.command(name="list")
def list_packs() -> None:
    """List the shipped packs and catalogs."""
    from ..lang.library import catalog_names, get_catalog, get_pack, pack_paths

    rows = []
    for name in pack_paths():
        pack = get_pack(name)
        first = " ".join(pack.doc.split()).split(". ")[0]
        rows.append((name, f"{len(pack.variables)} vars, {len(pack.equations)} eqs",
                     first if len(first) <= 78 else first[:77].rstrip() + "…"))
    echo("packs:")
    for line in _align(rows):
        echo("  " + line)
    echo("catalogs:")
    for name in catalog_names():
        cat = get_catalog(name)
        echo(f"  {name}: {', '.join(cat.entries)}")


@with_pack_path
@cli.command()
@click.argument("pack")
def show(pack: str) -> None:
    """Show a pack: its variables (unit, default, doc), equations and presets."""
    from ..lang.model import build_model

    model = build_model([pack])
    top = model.packs[0]
    import textwrap

    echo(textwrap.fill(printable(f"{top.name}: {' '.join(top.doc.split())}"), width=100, subsequent_indent="  "))
    if top.uses:
        echo(f"uses: {', '.join(u for u, _ in top.uses)}")
    echo("\nvariables:")
    rows = []
    for name, var in model.variables.items():
        unit = "|".join(var.choices) if var.choices else (var.display.text or "-")
        extra = []
        if var.default_text is not None:
            extra.append(f"default {var.default_text}")
        if var.integer:
            extra.append("integer")
        if var.limit:
            extra.append(var.limit.replace("_", " ") + " when given")
        rows.append((f"  {name}", unit, (var.doc + (f" ({'; '.join(extra)})" if extra else "")).strip()))
    for line in _align(rows):
        echo(line)
    echo("\nequations:")
    for eq in model.equations:
        echo(f"  {eq.text}    [{eq.where}]")
    if model.constraints:
        echo("\nconstraints:")
        for con in model.constraints:
            echo(f"  {con.text}    ({con.doc})")
    if model.presets:
        echo("\npresets: " + ", ".join(f"{k}=<{chain[0].catalog} id>" for k, chain in model.presets.items()))


@with_pack_path
@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
def check(paths: tuple[str, ...]) -> None:
    """Unit-check pack files or folders (default: the shipped packs). Exit 1 on any problem."""
    import time

    from ..lang.check import check_catalogs, check_paths
    from ..lang.library import formulas_dir
    from ..lang.units import save_cache

    start = time.perf_counter()
    targets = list(paths) or [str(formulas_dir())]
    diags, count = check_paths(targets)
    diags += check_catalogs(targets)
    if not diags:  # the examples need packs that load and check
        from ..solver.examples import example_diagnostics

        diags += example_diagnostics(targets)
    save_cache()
    for d in diags:
        echo(printable(str(d)))  # one diagnostic, one line
    elapsed = time.perf_counter() - start
    if diags:
        click.echo(f"{len(diags)} problem(s) in {count} pack(s) ({elapsed:.2f} s)", err=True)
        sys.exit(1)
    click.echo(f"ok: {count} pack(s) unit-consistent ({elapsed:.2f} s)")


@cli.group(cls=_LazyGroup)
def bench() -> None:
    """Benchmarks: each prints the machine, the baseline and the measured ratio."""


def _bench_commands() -> None:
    from ..bench import BENCHMARKS

    class _BenchGroup(_LazyGroup):
        def list_commands(self, ctx: click.Context) -> list[str]:
            from importlib.util import find_spec

            return sorted(n for n, mod in BENCHMARKS.items() if find_spec(mod) is not None)

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            if name not in BENCHMARKS:
                return None
            try:
                return importlib.import_module(BENCHMARKS[name]).command
            except ModuleNotFoundError:
                return None

    bench.__class__ = _BenchGroup


_bench_commands()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, map concur errors to one line and an exit code."""
    try:
        cli.main(args=argv, prog_name="concur", standalone_mode=False)
    except ConcurError as exc:
        if isinstance(exc, UnderdeterminedError) and "--" not in (exc.hint or ""):
            exc = with_flags(exc)
        echo(printable(f"error: {exc}"), err=True)  # one line, whatever the message quotes
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code if exc.exit_code else EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0)


if __name__ == "__main__":
    main()
