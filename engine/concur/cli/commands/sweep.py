"""``concur sweep``: one question over a range of values, as a table, CSV, JSON or PNG.

The question's givens come from ``--scenario`` (a file, or ``default``: the packs' embedded one),
then ``--set``; ``--over`` and ``--compare`` win over both. An integer variable's column (an axis
such as ``tp``, or an answer such as ``users``) prints whole numbers, not ``1.0``.

    $ concur sweep llm_throughput --over concurrency=1..256:9 --log --find tokens_per_s_per_gpu \\
        --set model=llama-3.1-8b --set gpu=h100-sxm-80gb --set input_tokens=1024 --set output_tokens=2048
    $ concur sweep llm_throughput --over concurrency=1,8,64 --find t_step --compare kv_dtype=bf16,fp8 ...
    $ concur sweep ... --over concurrency=1..256:1000000 --csv - | gzip > points.csv.gz

The evaluation is :func:`concur.sweep.vector.sweep` (vectorised; a per-point fallback shows a
progress bar on a terminal's stderr); this module parses options and hands the arrays to
:mod:`concur.cli.tabular` (CSV streamed chunk by chunk, JSON, a summarised table) and
:mod:`concur.cli.sweepplot`. ``-`` for ``--csv`` or ``--plot`` is stdout (then nothing else is
printed there: the table and notes go to stderr or are left out). Files are written to a temporary
name and renamed, so no half-written file is left.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..options import find_option, json_option, pack_path_option, set_option

__all__ = ["command", "run_sweeps"]


def run_sweeps(
    model: Any, over: dict[str, Any], given: dict[str, Any], outputs: list[str], compare: dict[str, list[Any]]
) -> list[tuple[str, dict[str, Any], Any]]:
    """One sweep per --compare combination: [(label, given, SweepResult)], with progress on a terminal."""
    from ...sweep.vector import grid_product, sweep
    from ..progress import progress

    combos = grid_product(compare) if compare else [{}]
    runs = []
    with progress("solving per point") as bar:
        for combo in combos:
            label = ", ".join(f"{k}={_plain(v)}" for k, v in combo.items()) or "scenario"
            if compare:
                bar.describe(f"{label}: solving per point")
            g = {**given, **combo}
            runs.append((label, g, sweep(model, over, g, outputs, progress=bar.update)))
    return runs


def _plain(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _unit(model: Any, name: str) -> str:
    if name in model.presets:
        return ""
    var = model.variables[name]
    return "" if var.choices else var.display.text


def _column(model: Any, name: str, values: Any) -> Any:
    """A result array ready to print: choice codes become their names (NaN: None), floats stay."""
    import numpy as np

    flat = values.ravel()
    var = model.variables.get(name)
    if var is not None and var.choices and flat.dtype != object:
        names = np.asarray(list(var.choices) + [None], dtype=object)
        codes = np.where(np.isfinite(flat), flat, len(var.choices)).astype(int)
        return names[codes]
    if var is not None and var.integer and flat.dtype.kind == "f":
        whole = np.isfinite(flat)
        if np.all(flat[whole] == np.round(flat[whole])) and np.all(np.abs(flat[whole]) < 2**53):
            if whole.all():
                return flat.astype(np.int64)  # an integer axis prints 1, 2, not 1.0, 2.0
            ints = np.full(flat.shape, None, dtype=object)  # NaN (no answer) stays empty/null
            ints[whole] = flat[whole].astype(np.int64).tolist()
            return ints
    return flat


def _blocks(model: Any, runs: list[Any], columns: list[str], with_label: bool) -> list[Any]:
    from ..tabular import Block

    return [
        Block((label,) if with_label else (), [_column(model, c, res[c]) for c in columns]) for label, _g, res in runs
    ]


@click.command(name="sweep")
@pack_path_option
@click.argument("packs", nargs=-1)
@click.option(
    "--over",
    "overs",
    multiple=True,
    required=True,
    metavar="VAR=START..STOP[:N] | VAR=a,b,c",
    help="values of a variable, in its display unit (two --over: a grid)",
)
@click.option("--log", is_flag=True, help="space START..STOP ranges logarithmically")
@find_option(required=True, help="variable(s) to compute (VAR or VAR,VAR)")
@set_option(help="a given value or a preset")
@click.option(
    "--compare",
    "compares",
    multiple=True,
    metavar="NAME=v1,v2",
    help="repeat the sweep for each value (several --compare: every combination)",
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE|-",
    help="write every point as CSV ('-': stdout, streamed)",
)
@click.option(
    "--scenario",
    metavar="FILE|-|default",
    help="start from a YAML file with given: {NAME: VALUE} ('-': stdin), or 'default' for the packs' "
    "embedded scenario (--set and --over win over it)",
)
@json_option
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE.png|-",
    help="write a PNG: the throughput curve for --over concurrency with a throughput --find, "
    "else --find against --over ('-': stdout, not a terminal)",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="print every row of the table (past 200 rows only the first and last 10 are shown)",
)
def command(
    packs: tuple[str, ...],
    overs: tuple[str, ...],
    log: bool,
    find: tuple[str, ...],
    sets: tuple[str, ...],
    compares: tuple[str, ...],
    scenario: str | None,
    csv_path: str | None,
    as_json: bool,
    plot_path: str | None,
    show_all: bool,
) -> None:
    """Solve for --find at every value of --over, vectorised (a million points in about a second).

    A throughput question must fix input_tokens, output_tokens, the offered load (concurrency)
    and the configuration (model/gpu or explicit architecture); concur refuses to assume them.
    Points with no admissible answer are NaN (empty in CSV, null in JSON) and counted, never an error.
    --scenario starts from a scenario file or (default) the packs' embedded scenario; --set and
    --over win over it. A grid holds at most 10,000,000 points (every --over and --compare together).
    """
    from ...analysis.curves import curve_y, extra_outputs, kv_limits
    from ...api import packs_for, refuse_unknown_names
    from ...errors import UsageError
    from ...lang.index import shipped_index
    from ...lang.model import build_model
    from ...solver.question import flush_caches
    from ...sweep.vector import range_values, require_fixed, require_points
    from ..givens import default_scenario, load_scenario, parse_sets, split_names
    from ..ranges import parse_range
    from ..render import echo, printable
    from ..streams import binary_output, is_stdio, text_output
    from ..sweepplot import draw
    from ..tabular import json_column, write_csv, write_table

    to_stdout = [
        what
        for what, on in (("--csv -", is_stdio(csv_path)), ("--plot -", is_stdio(plot_path)), ("--json", as_json))
        if on
    ]
    if len(to_stdout) > 1:
        raise UsageError(f"{' and '.join(to_stdout)} would both write stdout", hint="send one of them to a file")
    outputs = list(split_names(find))
    given = parse_sets(sets)
    over: dict[str, Any] = {}
    for text in overs:
        name, values, is_range = parse_range(text)
        if name in over:
            raise UsageError(f"--over {name} given twice")
        over[name] = range_values(values[0], values[1], values[2], log) if is_range else values
    compare: dict[str, list[Any]] = {}
    for text in compares:
        name, values, is_range = parse_range(text, "--compare")
        if is_range:
            raise UsageError(f"--compare {name}: list the values (NAME=v1,v2), not a range")
        compare[name] = values
    pack_list = list(packs)
    base: dict[str, Any] = {}
    if scenario and scenario != "default":
        base, scenario_packs, scenario_find = load_scenario(scenario)
        pack_list = pack_list or scenario_packs
        outputs = outputs or list(scenario_find)
    if not pack_list:
        refuse_unknown_names(outputs, (*base, *given, *over, *compare), shipped_index())
        pack_list = packs_for(tuple(outputs))
    if scenario == "default":
        base = default_scenario(pack_list)
    swept = set(over) | set(compare) | set(outputs)
    given = {**{k: v for k, v in base.items() if k not in swept}, **given}
    require_points([len(v) for v in over.values()] + [len(v) for v in compare.values()])
    model = build_model(pack_list)
    require_fixed(model, {**compare, **over, **given}, outputs)
    extra = extra_outputs(model, over, outputs) if plot_path else []
    runs = run_sweeps(model, over, given, outputs + extra, compare)
    flush_caches(model)
    columns = list(over) + [o for o in outputs if o not in over]
    header = [f"{c} [{_unit(model, c)}]" if _unit(model, c) else c for c in columns]
    messages = [f"{label}: {m}" if compare else m for label, _g, res in runs for m in res.messages]
    if csv_path:
        with text_output(csv_path) as out:
            write_csv(out, ["config"] + header, _blocks(model, runs, columns, with_label=True))
    if plot_path:
        with binary_output(plot_path, ".png") as png:
            y = curve_y(model, over, outputs)
            kv = kv_limits(model, runs, y) if y is not None else None
            draw(model, runs, over, outputs, given, str(png), log=log, kv=kv)
    if as_json:
        doc = {
            "over": list(over),
            "find": outputs,
            "units": {c: _unit(model, c) for c in columns},
            "runs": [
                {
                    "config": label,
                    "compare": {k: g[k] for k in compare},
                    "method": res.method,
                    "violations": res.violations,
                    "columns": {c: json_column(_column(model, c, res[c])) for c in columns},
                }
                for label, g, res in runs
            ],
            "messages": messages,
        }
        if csv_path or plot_path:
            doc["wrote"] = {k: v for k, v in (("csv", csv_path), ("plot", plot_path)) if v}
        click.echo(json.dumps(doc, indent=2))
        return
    if to_stdout:  # the CSV or PNG is on stdout: nothing else goes there
        for m in messages:
            echo(f"note: {m}", err=True)
        return
    write_table(
        sys.stdout,
        [printable(h) for h in (["config"] if compare else []) + header],
        _blocks(model, runs, columns, with_label=bool(compare)),
        show_all=show_all,
        left=int(bool(compare)),
    )
    for m in messages:
        echo(f"note: {m}")
    for path, what in ((csv_path, "CSV"), (plot_path, "PNG")):
        if path:
            echo(f"wrote {what} {path}")
