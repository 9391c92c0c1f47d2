"""``concur calibrate``: fit efficiency and t_fixed -- from your benchmark results, or on this machine.

    $ concur calibrate --from run-c1.json --from run-c8.json --set model=llama-3.1-8b --set gpu=h100-sxm-80gb
    $ concur calibrate --from ... --json                      # the fitted numbers as one JSON object
    $ concur calibrate --from ... --id my-h100 --catalog DIR   # add the entry to DIR/engines.yaml
    $ concur calibrate --report                               # per-cell errors of the shipped fit
    $ concur calibrate --model llama-3.1-8b --layers 2 --batches 1,8,32 -o engine.yaml  # PyTorch

``--from`` reads ``vllm bench serve --save-result`` JSON, SGLang ``bench_serving`` JSONL and
genai-perf/AIPerf profile exports (:mod:`concur.analysis.bench_import`); the configuration comes
from ``--set``. ``--report`` refits the shipped catalog on the published points and prints the
in-sample and leave-one-source-out error of every engine x GPU family cell
(:mod:`concur.analysis.engine_catalog`). Without either, the synthetic decode step of
:mod:`concur.analysis.calibrate_torch` runs on cuda when available (else the CPU). Files are
written atomically (a temporary file renamed into place).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from ..options import json_option

__all__ = ["command"]


_POINTS = Path(__file__).resolve().parents[4] / "tests" / "data" / "throughput_points.yaml"


def _write(target: Path, text: str) -> None:
    from ...analysis.engine_catalog import write_atomically

    write_atomically(target, text)


def _yaml(doc: object) -> str:
    from ...analysis.engine_catalog import yaml_text

    return yaml_text(doc)


def _report(points: str | None) -> None:
    from ...analysis.calibration import load_points
    from ...analysis.engine_catalog import report
    from ...analysis.engine_fits import cross_validate, fit_set
    from ...errors import UsageError

    path = Path(points) if points else _POINTS
    if not path.is_file():
        raise UsageError(
            f"no points file at {path}", hint="give --points tests/data/throughput_points.yaml from a source checkout"
        )
    pts = load_points(path)
    click.echo("\n".join(report(fit_set(pts), cross_validate(pts), pts)))


def _from_files(
    files: tuple[str, ...], sets: tuple[str, ...], entry_id: str, as_json: bool, output: str | None, catalog: str | None
) -> None:
    from ...analysis.bench_import import MAX_RUNS, catalog_document, fit_runs, read_runs
    from ...errors import UsageError
    from ..givens import parse_sets

    given = parse_sets(sets)
    missing = [k for k in ("model", "gpu") if k not in given]
    if missing:
        raise UsageError(
            f"--from needs the configuration the files were measured on: --set {missing[0]}=...",
            hint="e.g. --set model=llama-3.1-8b --set gpu=h100-sxm-80gb --set tp=1",
        )
    runs = []
    for f in files:
        runs.extend(read_runs(f))
        if len(runs) > MAX_RUNS:
            raise UsageError(
                f"--from files hold more than {MAX_RUNS:,} runs, the most one calibration reads",
                hint="calibrate on a sample of the runs",
            )
    result = fit_runs(runs, given)
    doc = catalog_document(result, entry_id, given)
    if as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        click.echo(
            f"efficiency {result.efficiency:.4f}, t_fixed {result.t_fixed * 1e3:.3f} ms, efficiency_prefill "
            f"{result.efficiency_prefill:.4f} ({result.prefill_from}); {len(runs)} runs, median |error| "
            f"{100 * result.median_abs_error:.1f}% in-sample, {100 * result.loo_median_abs_error:.1f}% on loads "
            f"left out ({result.loo})",
            err=True,
        )
        if not output and not catalog:
            click.echo(_yaml(doc), nl=False)
    if output:
        from ..streams import write_text

        write_text(output, _yaml(doc))
        if output != "-":
            click.echo(f"wrote {output}", err=True)
    if catalog:
        _into_catalog(Path(catalog), doc, entry_id)


def _into_catalog(folder: Path, doc: dict[str, Any], entry_id: str) -> None:
    """Add the entry to ``folder/engines.yaml`` (created if absent), keeping its other entries."""
    from ruamel.yaml import YAML

    from ...errors import UsageError

    if not folder.is_dir():
        raise UsageError(f"--catalog '{folder}' is not a folder")
    target = folder / "engines.yaml"
    if target.exists():
        from ...lang.yamlsafe import MAX_BYTES
        from ...readfile import FileRefused, read_regular

        try:  # a FIFO or a device under that name is refused, never read (it could block forever)
            text = read_regular(target, 16 * MAX_BYTES).decode("utf-8", errors="replace")
        except FileRefused as exc:
            raise UsageError(f"{target}: {exc.reason}") from None
        old = YAML(typ="safe").load(text) or {}
        if old.get("catalog") != "engines" or not isinstance(old.get("entries"), dict):
            raise UsageError(f"{target} is not an engines catalog", hint="give an empty folder or one of concur's")
        doc = {
            **doc,
            "fields": {**old.get("fields", {}), **doc["fields"]},
            "entries": {**old["entries"], entry_id: doc["entries"][entry_id]},
        }
    _write(target, _yaml(doc))
    click.echo(
        f"wrote {target} (use it: CONCUR_CATALOG_PATH={folder} concur solve ... --set engine={entry_id})", err=True
    )


@click.command(name="calibrate")
@click.option(
    "--from",
    "from_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="benchmark result file (vllm bench serve JSON, SGLang JSONL, genai-perf/AIPerf JSON); repeat",
)
@click.option(
    "--set",
    "-s",
    "sets",
    multiple=True,
    metavar="NAME=VALUE",
    help="with --from: the configuration measured (model=, gpu=, tp=, weight_dtype=, kv_dtype=)",
)
@json_option
@click.option(
    "--catalog",
    type=click.Path(file_okay=False),
    default=None,
    help="with --from: add the entry to this folder's engines.yaml (a user catalog folder)",
)
@click.option("--report", is_flag=True, help="print the per-cell errors of the published-points fit and exit")
@click.option(
    "--points",
    default=None,
    type=click.Path(dir_okay=False),
    help="with --report: the points file (default: tests/data/throughput_points.yaml of a checkout)",
)
@click.option(
    "--model", "model_id", default="llama-3.1-8b", show_default=True, help="catalog model whose shapes to use"
)
@click.option("--layers", type=int, default=2, show_default=True, help="layers run (the model scaled down)")
@click.option("--context", type=int, default=1024, show_default=True, help="KV-cache length per sequence (tokens)")
@click.option("--batches", default="1,4,16,32", show_default=True, help="batch sizes, comma-separated")
@click.option("--dtype", default="bf16", show_default=True, help="bf16, fp16 or fp32")
@click.option("--device", default=None, help="torch device (default: cuda if available, else cpu)")
@click.option("--bandwidth", type=float, default=None, help="memory bandwidth in TB/s (default: measure a copy)")
@click.option("--repeats", type=int, default=5, show_default=True, help="timed steps per batch size (median)")
@click.option("--id", "entry_id", default=None, help="catalog entry id (default: calibrated-DEVICE)")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    metavar="FILE|-",
    help="write the YAML entry here (default: stdout, or nowhere with --json)",
)
def command(
    from_files: tuple[str, ...],
    sets: tuple[str, ...],
    as_json: bool,
    catalog: str | None,
    report: bool,
    points: str | None,
    model_id: str,
    layers: int,
    context: int,
    batches: str,
    dtype: str,
    device: str | None,
    bandwidth: float | None,
    repeats: int,
    entry_id: str | None,
    output: str | None,
) -> None:
    """Fit efficiency and t_fixed: from benchmark results (--from), or a synthetic step on this machine."""
    import io

    from ...analysis.calibrate_torch import (
        catalog_entry,
        fit_step_times,
        measure,
        measure_bandwidth,
        require_torch,
        shapes_for,
    )
    from ...errors import UsageError
    from ..progress import progress
    from ..streams import is_stdio, write_text

    if entry_id is not None:
        from ...lang.pack import list_item_problem

        problem = list_item_problem(entry_id)
        if problem is not None:
            raise UsageError(f"--id {problem}", hint="an entry id such as my-h100")
    if report:
        _report(points)
        return
    if from_files:
        _from_files(from_files, sets, entry_id or "calibrated", as_json, output, catalog)
        return
    if sets or catalog:
        raise UsageError("--set and --catalog go with --from FILE")
    if output is None:
        output = "-"
    torch = require_torch()  # the one-line "needs PyTorch" error, exit 2, before anything else
    try:
        sizes = sorted({int(b) for b in batches.split(",") if b.strip()})
    except ValueError:
        raise UsageError(f"--batches '{batches}' must be whole numbers, e.g. 1,8,32") from None
    if bandwidth is not None and not bandwidth > 0:
        raise UsageError(f"--bandwidth must be positive (TB/s), got {bandwidth}")
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    shapes = shapes_for(model_id, layers)
    with progress("timing decode steps") as bar:
        samples = measure(shapes, context, sizes, device=dev, dtype=dtype, repeats=repeats, progress=bar.update)
    if bandwidth is None:
        bw, source = measure_bandwidth(dev, (1 << 30) if dev.startswith("cuda") else (1 << 28)), "measured copy"
    else:
        bw, source = bandwidth * 1e12, "given"
    fit = fit_step_times(samples, bw)
    name = torch.cuda.get_device_name(dev) if dev.startswith("cuda") else f"cpu ({os.cpu_count()} cores)"
    meta = {
        "device": dev,
        "device_name": name,
        "torch": str(torch.__version__),
        "model": model_id,
        "layers": layers,
        "dtype": dtype,
        "context": context,
        "bandwidth_source": source,
    }
    doc = catalog_entry(entry_id or f"calibrated-{dev.split(':')[0]}", fit, samples, meta)
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = None
    buf = io.StringIO()
    yaml.dump(doc, buf)
    if as_json and is_stdio(output):
        output = ""  # the JSON is the stdout document; the YAML entry goes only to a named file
    if not as_json:
        for s in samples:
            click.echo(
                f"batch {s.batch:>5}: {s.t_step * 1e3:9.3f} ms  bound {s.bytes / bw * 1e3:9.3f} ms  "
                f"measured/bound {s.t_step / (s.bytes / bw):6.2f}",
                err=True,
            )
        click.echo(
            f"efficiency {fit.efficiency:.4f}, t_fixed {fit.t_fixed * 1e3:.3f} ms "
            f"(bandwidth {bw / 1e12:.4g} TB/s, {source}; median |error| {100 * fit.median_abs_error:.1f}% in-sample, "
            f"{100 * fit.loo_median_abs_error:.1f}% leaving one batch size out)",
            err=True,
        )
    if output:
        write_text(output, buf.getvalue())
        if not is_stdio(output) and not as_json:
            click.echo(f"wrote {output}", err=True)
    if as_json:
        entry = next(iter(doc["entries"].values()))
        click.echo(
            json.dumps(
                {
                    "efficiency": fit.efficiency,
                    "t_fixed": {"value": fit.t_fixed * 1e3, "unit": "ms"},
                    "efficiency_prefill": None,
                    "points": entry["measurement"]["points"],
                    "median_abs_error": fit.median_abs_error,
                    "loo_median_abs_error": fit.loo_median_abs_error,
                    "bandwidth": {"value": bw / 1e12, "unit": "TB/s", "source": source},
                    **({"wrote": output} if output else {}),
                },
                indent=2,
            )
        )
