"""``concur calibrate``: fit efficiency and t_fixed on this machine (optional extra: PyTorch).

    $ concur calibrate --model llama-3.1-8b --layers 2 --context 1024 --batches 1,8,32 -o engine.yaml

Runs the synthetic decode step of :mod:`concur.analysis.calibrate_torch` on cuda when available (else the
CPU), fits ``t_step = bytes / (efficiency x bandwidth) + t_fixed`` and writes an engines-catalog
entry with the measurement attached (atomically: a temporary file renamed into place).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

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
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="write the YAML entry here (default: stdout)")
def command(model_id: str, layers: int, context: int, batches: str, dtype: str, device: str | None,
            bandwidth: float | None, repeats: int, entry_id: str | None, output: str | None) -> None:
    """Measure a synthetic decode step, fit efficiency and t_fixed, print a catalog entry."""
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

    torch = require_torch()  # the one-line "needs PyTorch" error, exit 2, before anything else
    try:
        sizes = sorted({int(b) for b in batches.split(",") if b.strip()})
    except ValueError:
        raise UsageError(f"--batches '{batches}' must be whole numbers, e.g. 1,8,32") from None
    if bandwidth is not None and not bandwidth > 0:
        raise UsageError(f"--bandwidth must be positive (TB/s), got {bandwidth}")
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    shapes = shapes_for(model_id, layers)
    samples = measure(shapes, context, sizes, device=dev, dtype=dtype, repeats=repeats)
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
    for s in samples:
        click.echo(f"batch {s.batch:>5}: {s.t_step * 1e3:9.3f} ms  bound {s.bytes / bw * 1e3:9.3f} ms  "
                   f"measured/bound {s.t_step / (s.bytes / bw):6.2f}", err=True)
    click.echo(f"efficiency {fit.efficiency:.4f}, t_fixed {fit.t_fixed * 1e3:.3f} ms "
               f"(bandwidth {bw / 1e12:.4g} TB/s, {source}; median |error| {100 * fit.median_abs_error:.1f}%)", err=True)
    if not output:
        click.echo(buf.getvalue(), nl=False)
        return
    target = Path(output)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(buf.getvalue(), encoding="utf-8")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    click.echo(f"wrote {output}", err=True)
