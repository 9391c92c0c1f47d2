"""The ``concur`` command line.

Only this module prints or exits. Every :class:`concur.errors.ConcurError`
becomes one line on stderr and its exit code (0 ok, 1 check failed,
2 usage/input, 3 impossible scenario); a traceback means a bug in concur.
Sub-commands other than the core ones live in :mod:`concur.cli.commands` and
:mod:`concur.bench` and are imported only when invoked.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from ..errors import EXIT_USAGE, ConcurError, UsageError

__all__ = ["main", "cli"]

# name -> module defining `command`; imported on first use so `concur --help` stays fast.
COMMANDS = {
    "sweep": "concur.cli.commands.sweep",
    "export": "concur.cli.commands.export",
    "simulate": "concur.cli.commands.simulate",
    "diagnose": "concur.cli.commands.diagnose",
    "remedies": "concur.cli.commands.remedies",
    "calibrate": "concur.cli.commands.calibrate",
}


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
            return importlib.import_module(COMMANDS[name]).command
        except ModuleNotFoundError:
            return None


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
    """A scenario file: ``given:`` values, optional ``packs:`` and ``find:``."""
    from ..errors import PackError
    from ..lang.yamlsafe import YMap, load_yaml

    try:
        data = load_yaml(path)
    except PackError as exc:  # a scenario is the user's input: exit 2, not a failed check
        raise UsageError(exc.render_body(), where=exc.where, hint=exc.hint) from None
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
            if step.method == "search":
                how = step.note
            elif step.equation:
                how = f"{step.equation}  [{step.where}]"
            else:
                how = step.method
        rows.append((name, format_value(res["value"], res["unit"]), how))
    lines = _align(rows)
    if explain:
        lines.append("")
        lines.append("derivation (in order):")
        steps = []
        for s in sol.trace:
            var = sol.model.variables[s.variable]
            value = var.choices[int(s.value)] if var.choices else s.value / var.display.factor
            detail = s.equation or s.note or s.method
            if s.method in ("given", "preset", "default"):
                detail = s.note if s.method == "preset" and s.note else s.method
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
    from ..api import packs_for
    from ..solver.throughput_inputs import require_fixed
    from ..lang.model import build_model
    from ..solver.question import save_inverse_cache, solve_model
    from ..lang.units import save_cache

    given: dict[str, Any] = {}
    pack_list = list(packs)
    targets = _split(find)
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
    model = build_model(pack_list)
    require_fixed(model, set(given), targets)
    sol = solve_model(model, targets, given)
    save_inverse_cache(model)
    save_cache()
    return sol


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
        click.echo(json.dumps(sol.to_json(), indent=2))
    else:
        click.echo(render_table(sol, explain))


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
    click.echo("packs:")
    for line in _align(rows):
        click.echo("  " + line)
    click.echo("catalogs:")
    for name in catalog_names():
        cat = get_catalog(name)
        click.echo(f"  {name}: {', '.join(cat.entries)}")


@cli.command()
@click.argument("pack")
def show(pack: str) -> None:
    """Show a pack: its variables (unit, default, doc), equations and presets."""
    from ..lang.model import build_model

    model = build_model([pack])
    top = model.packs[0]
    import textwrap

    click.echo(textwrap.fill(f"{top.name}: {' '.join(top.doc.split())}", width=100, subsequent_indent="  "))
    if top.uses:
        click.echo(f"uses: {', '.join(u for u, _ in top.uses)}")
    click.echo("\nvariables:")
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
        click.echo(line)
    click.echo("\nequations:")
    for eq in model.equations:
        click.echo(f"  {eq.text}    [{eq.where}]")
    if model.constraints:
        click.echo("\nconstraints:")
        for con in model.constraints:
            click.echo(f"  {con.text}    ({con.doc})")
    if model.presets:
        click.echo("\npresets: " + ", ".join(f"{k}=<{p.catalog} id>" for k, p in model.presets.items()))


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
    save_cache()
    for d in diags:
        click.echo(str(d))
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
        click.echo(f"error: {exc}", err=True)
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
