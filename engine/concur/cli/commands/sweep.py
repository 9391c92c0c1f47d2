"""``concur sweep``: one question over a range of values, as a table, CSV, JSON or PNG.

    $ concur sweep llm_throughput --over concurrency=1..256:9 --log --find tokens_per_s_per_gpu \\
        --set model=llama-3.1-8b --set gpu=h100-sxm-80gb --set input_tokens=1024 --set output_tokens=2048
    $ concur sweep llm_throughput --over concurrency=1,8,64 --find t_step --compare kv_dtype=bf16,fp8 ...

The evaluation is :func:`concur.sweep.vector.sweep` (vectorised); this module only parses options and
renders. Files are written to a temporary name and renamed, so no half-written file is left.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["command", "run_sweeps"]

_CURVE = ("tokens_per_s_per_user", "tokens_per_s_per_gpu", "bound_tokens_per_s", "kv_tokens", "avg_context", "gpus")


def run_sweeps(model: Any, over: dict[str, Any], given: dict[str, Any], outputs: list[str],
               compare: dict[str, list[Any]]) -> list[tuple[str, dict[str, Any], Any]]:
    """One sweep per --compare combination: [(label, given, SweepResult)]."""
    from ...sweep.vector import grid_product, sweep

    combos = grid_product(compare) if compare else [{}]
    runs = []
    for combo in combos:
        label = ", ".join(f"{k}={_plain(v)}" for k, v in combo.items()) or "scenario"
        g = {**given, **combo}
        runs.append((label, g, sweep(model, over, g, outputs, progress=_progress_bar())))
    return runs


def _plain(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _progress_bar() -> Any:
    """A rich progress callback for long per-point sweeps (stderr, only when it is a terminal)."""
    state: dict[str, Any] = {}  # "bar": rich Progress, "task": its task id

    def update(done: int, total: int) -> None:
        if total < 200 or not sys.stderr.isatty():
            return
        if "bar" not in state:
            from rich.progress import Progress

            state["bar"] = Progress(transient=True)
            state["bar"].start()
            state["task"] = state["bar"].add_task("solving per point", total=total)
        state["bar"].update(state["task"], completed=done)
        if done >= total:
            state.pop("bar").stop()

    return update


def _unit(model: Any, name: str) -> str:
    if name in model.presets:
        return ""
    var = model.variables[name]
    return "" if var.choices else var.display.text


def _cell(model: Any, name: str, value: Any) -> Any:
    """A JSON/CSV value: choice codes as their names, NaN as None."""
    if isinstance(value, str):
        return value
    if name in model.variables and model.variables[name].choices:
        return model.variables[name].choices[int(value)] if math.isfinite(value) else None
    value = float(value)
    return value if math.isfinite(value) else None


def _text(value: Any) -> str:
    if value is None:
        return "nan"
    if isinstance(value, str):
        return value
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) >= 1e-3 else f"{value:.4g}"


def _rows(model: Any, runs: list[tuple[str, dict[str, Any], Any]], columns: list[str]) -> list[list[Any]]:
    rows = []
    for label, _g, res in runs:
        flat = {c: res[c].ravel() for c in columns}
        for i in range(len(flat[columns[0]])):
            rows.append([label] + [_cell(model, c, flat[c][i]) for c in columns])
    return rows


def _atomic_write(path: str, text: str) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _csv(model: Any, runs: list[Any], columns: list[str], path: str) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["config"] + [f"{c} [{_unit(model, c)}]" if _unit(model, c) else c for c in columns])
    for row in _rows(model, runs, columns):
        w.writerow(["" if v is None else v for v in row])
    _atomic_write(path, buf.getvalue())


def _plot(model: Any, runs: list[Any], over: dict[str, Any], outputs: list[str], path: str) -> str:
    import numpy as np

    from ...analysis.plot import Series, line_plot, throughput_curve

    if "concurrency" in over and len(over) == 1 and "tokens_per_s_per_gpu" in model.variables:
        series = []
        for label, _g, res in runs:
            c = res["concurrency"]
            gpus = res["gpus"]
            bound = res["bound_tokens_per_s"]
            fits = np.floor(res["kv_tokens"] / res["avg_context"])
            limit = float(np.nanmax(fits)) if np.isfinite(fits).any() else None
            series.append(Series(label, c, res["tokens_per_s_per_user"], res["tokens_per_s_per_gpu"],
                                 bound / c, bound / gpus, limit))
        throughput_curve(series, path)
        return "throughput curve"
    (name,) = list(over)[:1]
    ys = {f"{o} ({label})" if len(runs) > 1 else o: res[o].ravel()
          for label, _g, res in runs for o in outputs if o not in over}
    x = runs[0][2][name].ravel()
    if runs[0][2][name].ndim != 1 or x.dtype == object:
        raise click.UsageError("--plot draws one numeric --over variable (or concurrency for the throughput curve)")
    ylabel = ", ".join(f"{o} [{_unit(model, o)}]" if _unit(model, o) else o for o in outputs if o not in over)
    line_plot(x, ys, path, f"{name} [{_unit(model, name)}]", ylabel)
    return "line plot"


@click.command(name="sweep")
@click.argument("packs", nargs=-1)
@click.option("--over", "overs", multiple=True, required=True, metavar="VAR=START..STOP[:N] | VAR=a,b,c",
              help="values of a variable, in its display unit (two --over: a grid)")
@click.option("--log", is_flag=True, help="space START..STOP ranges logarithmically")
@click.option("--find", "-f", "find", multiple=True, required=True, help="variable(s) to compute (VAR or VAR,VAR)")
@click.option("--set", "-s", "sets", multiple=True, metavar="NAME=VALUE", help="a given value or a preset")
@click.option("--compare", "compares", multiple=True, metavar="NAME=v1,v2",
              help="repeat the sweep for each value (several --compare: every combination)")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="write the table as CSV")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="write a PNG")
def command(packs: tuple[str, ...], overs: tuple[str, ...], log: bool, find: tuple[str, ...], sets: tuple[str, ...],
            compares: tuple[str, ...], csv_path: str | None, as_json: bool, plot_path: str | None) -> None:
    """Solve for --find at every value of --over (vectorised: 100,000 points in well under a second).

    A throughput question must fix input_tokens, output_tokens, the offered load (concurrency)
    and the configuration (model/gpu or explicit architecture); concur refuses to assume them.
    Points with no admissible answer are NaN and counted, never an error.
    """
    from ...api import packs_for
    from ..givens import parse_sets, split_names
    from ...errors import UsageError
    from ...lang.model import build_model
    from ...solver.question import save_inverse_cache
    from ...sweep.vector import parse_range, range_values, require_fixed
    from ...lang.units import save_cache

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
        name, values, is_range = parse_range(text)
        if is_range:
            raise UsageError(f"--compare {name}: list the values (NAME=v1,v2), not a range")
        compare[name] = values
    model = build_model(list(packs) if packs else packs_for(tuple(outputs)))
    require_fixed(model, set(given) | set(over) | set(compare), outputs)
    extra = []
    if plot_path and "concurrency" in over and len(over) == 1 and "tokens_per_s_per_gpu" in model.variables:
        extra = [c for c in _CURVE if c not in outputs and c not in over]
    runs = run_sweeps(model, over, given, outputs + extra, compare)
    save_inverse_cache(model)
    save_cache()
    columns = list(over) + [o for o in outputs if o not in over]
    messages = [f"{label}: {m}" if compare else m for label, _g, res in runs for m in res.messages]
    if csv_path:
        _csv(model, runs, columns, csv_path)
    if plot_path:
        _plot(model, runs, over, outputs, plot_path)
    if as_json:
        doc = {"over": list(over), "find": outputs,
               "units": {c: _unit(model, c) for c in columns},
               "runs": [{"config": label, "compare": {k: g[k] for k in compare},
                         "method": res.method, "violations": res.violations,
                         "columns": {c: [_cell(model, c, v) for v in res[c].ravel()] for c in columns}}
                        for label, g, res in runs],
               "messages": messages}
        click.echo(json.dumps(doc, indent=2))
        return
    header = [f"{c} [{_unit(model, c)}]" if _unit(model, c) else c for c in columns]
    show_config = bool(compare)
    table = [(["config"] if show_config else []) + header]
    for row in _rows(model, runs, columns):
        table.append(([row[0]] if show_config else []) + [_text(v) for v in row[1:]])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        click.echo("  ".join(c.ljust(w) if show_config and not j else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))).rstrip())
    for m in messages:
        click.echo(f"note: {m}")
    for path, what in ((csv_path, "CSV"), (plot_path, "PNG")):
        if path:
            click.echo(f"wrote {what} {path}")
