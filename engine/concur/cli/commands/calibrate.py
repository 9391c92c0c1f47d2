"""``concur calibrate``: fit efficiency and t_fixed on this machine (optional extra: PyTorch).

    $ concur calibrate --model llama-3.1-8b --layers 2 --context 1024 --batches 1,8,32 -o engine.yaml

Runs the synthetic decode step of :mod:`concur.analysis.calibrate_torch` on cuda when available (else the
CPU), fits ``t_step = bytes / (efficiency x bandwidth) + t_fixed`` and writes an engines-catalog
entry with the measurement attached (atomically: a temporary file renamed into place).
"""

from __future__ import annotations

import json
import os

import click

from ..options import json_option

__all__ = ["command"]


@click.command(name="calibrate")
@click.option("--model", "model_id", default="llama-3.1-8b", show_default=True, help="catalog model whose shapes to use")
@click.option("--layers", type=int, default=2, show_default=True, help="layers run (the model scaled down)")
@click.option("--context", type=int, default=1024, show_default=True, help="KV-cache length per sequence (tokens)")
@click.option("--batches", default="1,4,16,32", show_default=True, help="batch sizes, comma-separated")
@click.option("--dtype", default="bf16", show_default=True, help="bf16, fp16 or fp32")
@click.option("--device", default=None, help="torch device (default: cuda if available, else cpu)")
@click.option("--bandwidth", type=float, default=None, help="memory bandwidth in TB/s (default: measure a copy)")
@click.option("--repeats", type=int, default=5, show_default=True, help="timed steps per batch size (median)")
@click.option("--id", "entry_id", default=None, help="catalog entry id (default: calibrated-DEVICE)")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-", metavar="FILE|-",
              help="write the YAML entry here  [default: - (stdout)]")
@json_option
def command(model_id: str, layers: int, context: int, batches: str, dtype: str, device: str | None,
            bandwidth: float | None, repeats: int, entry_id: str | None, output: str, as_json: bool) -> None:
    """Measure a synthetic decode step, fit efficiency and t_fixed, print a catalog entry.

    --json prints {"efficiency", "t_fixed": {"value", "unit"}, "efficiency_prefill", "points",
    "median_abs_error", "bandwidth": {"value", "unit"}} (and "wrote" when -o names a file).
    """
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
    meta = {"device": dev, "device_name": name, "torch": str(torch.__version__), "model": model_id, "layers": layers,
            "dtype": dtype, "context": context, "bandwidth_source": source}
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
            click.echo(f"batch {s.batch:>5}: {s.t_step * 1e3:9.3f} ms  bound {s.bytes / bw * 1e3:9.3f} ms  "
                       f"measured/bound {s.t_step / (s.bytes / bw):6.2f}", err=True)
        click.echo(f"efficiency {fit.efficiency:.4f}, t_fixed {fit.t_fixed * 1e3:.3f} ms "
                   f"(bandwidth {bw / 1e12:.4g} TB/s, {source}; median |error| {100 * fit.median_abs_error:.1f}%)",
                   err=True)
    if output:
        write_text(output, buf.getvalue())
        if not is_stdio(output) and not as_json:
            click.echo(f"wrote {output}", err=True)
    if as_json:
        entry = next(iter(doc["entries"].values()))
        click.echo(json.dumps({"efficiency": fit.efficiency, "t_fixed": {"value": fit.t_fixed * 1e3, "unit": "ms"},
                               "efficiency_prefill": None, "points": entry["measurement"]["points"],
                               "median_abs_error": fit.median_abs_error,
                               "bandwidth": {"value": bw / 1e12, "unit": "TB/s", "source": source},
                               **({"wrote": output} if output else {})}, indent=2))
