"""``concur bench sweep``: a 100,000-point sweep of the decode step against hand-written numpy.

The sweep (:func:`concur.sweep.vector.sweep`) compiles each block of the ``llm_throughput`` pack once
and evaluates it over the whole concurrency array. The baseline is the same formula written by
hand in numpy (weights and KV read over bandwidth, weight and attention FLOPs over the achievable
peak, the slower one over the efficiency plus the fixed cost, including the pack's MoE-aware
weight read), with the
per-configuration constants taken from the same solve, so only the evaluation is compared.
Targets: under 1 s, at most 2x the hand-written code. Both answers are checked equal (rel
1e-9) before any time is reported.

Times are the median of ``--runs`` runs after one warm-up, which builds and caches the plan
(one structural solve and one scalar validation solve); timed runs pay only for evaluation.

The second comparison is the output side of ``concur sweep ... --csv FILE``: the sweep of
``--csv-points`` concurrencies (default ten times ``--points``: a million) *and* writing it as CSV
with :func:`concur.cli.tabular.write_csv`, against ``numpy.savetxt`` writing the same columns
(the config label, concurrency and tokens/s per GPU, with the header) to a file. Target: at
most 3x numpy. The CSV is read back and compared with the arrays before any time is reported,
and the peak memory traced while writing is printed next to the size of the arrays.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..cli.progress import progress

if TYPE_CHECKING:  # numpy is imported where the sweep runs, not with the command
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["command"]

GIVEN = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "input_tokens": 1024,
    "output_tokens": 2048,
}


def _hand(
    c: NDArray[np.float64],
    weights: float,
    a: float,
    decay: float,
    kv_per_token: float,
    avg_context: float,
    bw: float,
    active_per_gpu: float,
    attention: float,
    peak: float,
    flops_fraction: float,
    eff: float,
    t_fixed: float,
    gpus: float,
    kv_batch_limit: float,
) -> NDArray[np.float64]:
    import numpy as np

    weights_read = weights * (1.0 - (1.0 - a) * np.exp(-decay * (c - 1.0)))  # the pack's MoE-aware read
    memory = (weights_read + c * avg_context * kv_per_token) / bw
    compute = (2.0 * active_per_gpu + attention) * c / peak
    t_step = np.maximum(memory, compute / flops_fraction) / eff + t_fixed  # tp 1: no all-reduce
    return np.where(c <= kv_batch_limit, t_step, np.nan)  # the decode-only step; the pack's KV-fit check


@click.command(name="sweep")
@click.option("--points", type=int, default=100_000, show_default=True, help="concurrency values swept")
@click.option("--runs", type=int, default=5, show_default=True, help="timed runs (median reported)")
@click.option("--csv-points", type=int, default=None, help="points of the CSV comparison  [default: 10 x --points]")
def command(points: int, runs: int, csv_points: int | None) -> None:
    """Time a vectorised sweep of llm_throughput (the decode step t_step over concurrency)."""
    import numpy as np

    from ..lang.model import build_model
    from ..solver.question import solve_model
    from ..sweep.vector import MAX_POINTS, sweep

    csv_points = 10 * points if csv_points is None else csv_points
    if points < 1 or runs < 1 or csv_points < 1:
        raise click.UsageError("--points, --runs and --csv-points must be positive")
    if max(points, csv_points) > MAX_POINTS:  # concur sweep's own cap: 10^9 points ran for minutes
        raise click.UsageError(f"--points and --csv-points take at most {MAX_POINTS:,} (a sweep's cap)")
    model = build_model(["llm_throughput"])
    wanted = (
        "weights_per_gpu",
        "active_fraction",
        "expert_decay",
        "kv_per_token",
        "avg_context",
        "active_params_per_gpu",
        "attention_flops",
        "peak_flops",
        "efficiency",
        "t_fixed",
        "gpus",
        "kv_batch_limit",
    )
    # active_fraction asked for: a preset's active_params does not compute it
    sol = solve_model(model, wanted, {**GIVEN, "concurrency": 1})
    v = sol.values  # base units
    args = (
        v["weights_per_gpu"],
        v["active_fraction"],
        v["expert_decay"],
        v["kv_per_token"],
        v["avg_context"],
        v["hbm_bandwidth"],
        v["active_params_per_gpu"],
        v["attention_flops"],
        v["peak_flops"],
        v["flops_fraction"],
        v["efficiency"],
        v["t_fixed"],
        v["gpus"],
        v["kv_batch_limit"],
    )
    kv_limit = float(np.floor(v["kv_batch_limit"]))  # beyond it every point is NaN: not timed
    c = np.linspace(1.0, kv_limit, points)
    sweep(model, {"concurrency": c[:10]}, GIVEN, ["t_step"], base_units=True)  # warm-up
    ours = sweep(model, {"concurrency": c}, GIVEN, ["t_step"], base_units=True)["t_step"]
    ref = _hand(c, *args)
    if not np.allclose(ours, ref, rtol=1e-9, atol=0) or np.isnan(ours).any():
        raise click.ClickException("the sweep and the hand-written formula disagree; not timing a wrong answer")
    t_ours, t_hand = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        sweep(model, {"concurrency": c}, GIVEN, ["t_step"], base_units=True)
        t1 = time.perf_counter()
        _hand(c, *args)
        t2 = time.perf_counter()
        t_ours.append(t1 - t0)
        t_hand.append(t2 - t1)
    ours_s, hand_s = statistics.median(t_ours), statistics.median(t_hand)
    click.echo(
        f"machine: {os.cpu_count()} core(s); {points:,} points (concurrency 1..{kv_limit:.0f}, "
        f"the KV pool's limit); median of {runs} runs"
    )
    click.echo(f"concur sweep         {ours_s * 1000:9.2f} ms  (target < 1000 ms: {'ok' if ours_s < 1 else 'MISSED'})")
    click.echo(f"hand-written numpy   {hand_s * 1000:9.2f} ms")
    verdict = "ok" if ours_s <= 2 * hand_s else "MISSED"
    click.echo(
        f"ratio                {ours_s / hand_s:9.2f} x  (target <= 2 x: {verdict}; "
        "the sweep also checks every value it computes)"
    )
    _csv_comparison(model, csv_points, min(runs, 3), kv_limit)


HEADER = ["config", "concurrency [request]", "tokens_per_s_per_gpu [token/s]"]


def _ours(model: Any, c: Any, path: Path) -> Any:
    """What `concur sweep ... --csv FILE` does after parsing: sweep, then stream the CSV."""
    from ..cli.streams import text_output
    from ..cli.tabular import Block, write_csv
    from ..sweep.vector import sweep

    y = sweep(model, {"concurrency": c}, GIVEN, ["tokens_per_s_per_gpu"])["tokens_per_s_per_gpu"]
    with text_output(str(path)) as out:
        write_csv(out, HEADER, [Block(("scenario",), [c, y])])
    return y


def _numpy(c: Any, y: Any, path: Path) -> None:
    import numpy as np

    np.savetxt(path, np.column_stack([c, y]), fmt="scenario,%.17g,%.17g", header=",".join(HEADER), comments="")


def _csv_comparison(model: Any, n: int, runs: int, kv_limit: float) -> None:
    import numpy as np

    c = np.linspace(1.0, kv_limit, n)
    with (
        tempfile.TemporaryDirectory(prefix="concur-bench-") as folder,
        progress(f"sweep to CSV, {n:,} points", eager=True),
    ):
        ours_path, numpy_path = Path(folder) / "ours.csv", Path(folder) / "numpy.csv"
        y = _ours(model, c, ours_path)
        _numpy(c, y, numpy_path)
        back = np.loadtxt(ours_path, delimiter=",", skiprows=1, usecols=(1, 2))
        ref = np.loadtxt(numpy_path, delimiter=",", skiprows=1, usecols=(1, 2))
        if not (np.array_equal(back[:, 0], c) and np.array_equal(back[:, 1], y) and np.array_equal(ref, back)):
            raise click.ClickException("the CSV does not read back to the swept values; not timing it")
        t_ours, t_numpy = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            _ours(model, c, ours_path)
            t1 = time.perf_counter()
            _numpy(c, y, numpy_path)
            t2 = time.perf_counter()
            t_ours.append(t1 - t0)
            t_numpy.append(t2 - t1)
        tracemalloc.start()
        _ours(model, c, ours_path)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        size_ours, size_numpy = ours_path.stat().st_size, numpy_path.stat().st_size
    ours_s, numpy_s = statistics.median(t_ours), statistics.median(t_numpy)
    arrays = 2 * c.nbytes
    click.echo(f"\nsweep to CSV: {n:,} points; median of {runs} runs; both files read back equal")
    click.echo(
        f"concur sweep + CSV   {ours_s * 1000:9.1f} ms  ({size_ours / 2**20:.1f} MiB, shortest round-trip digits)"
    )
    click.echo(f"numpy.savetxt        {numpy_s * 1000:9.1f} ms  ({size_numpy / 2**20:.1f} MiB, 17 digits)")
    verdict = "ok" if ours_s <= 3 * numpy_s else "MISSED"
    click.echo(f"ratio                {ours_s / numpy_s:9.2f} x  (target <= 3 x: {verdict})")
    click.echo(f"peak traced memory   {peak / 2**20:9.1f} MiB  (the two arrays: {arrays / 2**20:.1f} MiB)")
