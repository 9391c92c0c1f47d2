"""``concur simulate``: run the discrete-event simulator and compare with the analytic answer.

    $ concur simulate --rate 30 --replicas 10 --output-tokens 400 --ttft 0.5 \\
        --step-base 0.02 --step-per-seq 0.0005 --max-batch 256 --duration 600 --seed 1
    $ concur simulate --model mmc --rate 0.0556 --service-time 180 --servers 14 --duration 200000

Errors are :class:`concur.errors.ConcurError` subclasses; ``concur.cli.main`` turns them
into a one-line message and exit code 2 (one JSON object under ``--json``). The run shows a
progress bar on stderr when stderr is a terminal; ``--plot -`` writes the PNG to stdout.
"""

from __future__ import annotations

import json
import math

import click

from ..options import json_option

__all__ = ["command"]


def _fmt(x: float, digits: int = 4) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else "nan"
    return f"{x:.{digits}g}"


@click.command(name="simulate")
@click.option(
    "--model",
    "kind",
    type=click.Choice(["llm", "mmc"]),
    default="llm",
    show_default=True,
    help="llm: continuous-batching fleet; mmc: plain M/M/c queue (validates Erlang C).",
)
@click.option(
    "--rate", type=float, required=True, help="Poisson arrival rate, request/s (mmc: per unit of --service-time)."
)
@click.option("--replicas", type=int, default=1, show_default=True, help="llm: replicas serving in parallel (replica).")
@click.option(
    "--output-tokens",
    "--osl",
    "output_tokens",
    type=float,
    default=400.0,
    show_default=True,
    help="llm: output tokens per request (token/request).",
)
@click.option(
    "--ttft",
    type=float,
    default=0.5,
    show_default=True,
    help="llm: time to first token, s (prefill; the request holds its slot).",
)
@click.option("--step-base", type=float, default=0.02, show_default=True, help="llm: fixed decode step time a, s.")
@click.option(
    "--step-per-seq",
    type=float,
    default=0.0005,
    show_default=True,
    help="llm: added step time per sequence in the batch k, s.",
)
@click.option(
    "--max-batch",
    type=int,
    default=256,
    show_default=True,
    help="llm: per-replica concurrency cap, request/replica; excess waits in a FIFO.",
)
@click.option(
    "--service-time",
    type=float,
    default=1.0,
    show_default=True,
    help="mmc: mean service time (its unit is the run's time unit).",
)
@click.option("--servers", type=int, default=1, show_default=True, help="mmc: servers.")
@click.option(
    "--service",
    type=click.Choice(["exponential", "deterministic"]),
    default="exponential",
    show_default=True,
    help="mmc: service time distribution.",
)
@click.option("--duration", type=float, default=600.0, show_default=True, help="simulated time (s for llm).")
@click.option(
    "--warmup",
    type=float,
    default=None,
    help="initial time excluded from statistics [default: duration/10; llm: 3 "
    "relaxation times of the fixed point, at most half the run].",
)
@click.option("--seed", type=int, default=1, show_default=True, help="random seed.")
@click.option(
    "--batches", type=int, default=20, show_default=True, help="batch-means slices for the 95% confidence intervals."
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    metavar="FILE.png|-",
    help="write a PNG of queue length and in-flight requests over time ('-': stdout, not a terminal).",
)
@json_option
def command(
    kind: str,
    rate: float,
    replicas: int,
    output_tokens: float,
    ttft: float,
    step_base: float,
    step_per_seq: float,
    max_batch: int,
    service_time: float,
    servers: int,
    service: str,
    duration: float,
    warmup: float | None,
    seed: int,
    batches: int,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """Simulate Poisson arrivals into a serving fleet (or an M/M/c queue) and report
    latency, in-flight requests and queue length with 95% confidence intervals,
    next to the analytic answer (Little's-law fixed point or Erlang C)."""
    from ...analysis.simulate import LLMFleet, MMcQueue, fixed_point, plot_timeseries, simulate
    from ...errors import UsageError
    from ..progress import progress
    from ..streams import binary_output, is_stdio

    if as_json and is_stdio(plot_path):
        raise UsageError("--plot - and --json would both write stdout", hint="send the PNG to a file")

    model: LLMFleet | MMcQueue
    analytic: dict[str, float]
    if kind == "llm":
        model = LLMFleet(rate, replicas, output_tokens, ttft, step_base, step_per_seq, max_batch)
        fp = fixed_point(model)
        analytic = {
            "in_flight": fp["in_flight"],
            "latency": fp["residence_time"],
            "saturation_rate": fp["saturation_rate"],
        }
    else:
        from ...maths.erlang import mmc

        model = MMcQueue(rate, service_time, servers, service)  # type: ignore[arg-type]
        q = mmc(rate, service_time, servers)
        analytic = {
            "in_flight": min(q.load, float(servers)),
            "latency": q.mean_residence,
            "wait": q.mean_wait,
            "p_wait": q.p_wait,
            "in_queue": q.mean_in_queue,
        }
        if service == "deterministic":
            analytic = {k: v for k, v in analytic.items() if k == "in_flight"}
    with progress("simulating") as bar:
        res = simulate(model, duration, seed=seed, warmup=warmup, batches=batches, progress=bar.update)
    if plot_path:
        with binary_output(plot_path, ".png") as png:
            plot_timeseries(res, png)
        if is_stdio(plot_path):
            return
    if as_json:
        out = res.as_dict()
        out["analytic"] = analytic
        if plot_path:
            out["plot"] = plot_path
        click.echo(json.dumps(out, indent=2, default=float))
        return
    unit = "s" if kind == "llm" else ""
    rows = [
        ("latency mean", res.latency, analytic.get("latency"), unit),
        ("wait in queue", res.wait, analytic.get("wait"), unit),
        ("P(wait)", res.p_wait, analytic.get("p_wait"), ""),
        ("in flight (admitted)", res.in_flight, analytic.get("in_flight"), "request"),
        ("waiting in queue", res.in_queue, analytic.get("in_queue"), "request"),
    ]
    click.echo(f"{'':24}{'simulated':>12} {'±95% CI':>10} {'analytic':>10}")
    for name, est, ref, u in rows:
        click.echo(
            f"{name:24}{_fmt(est.mean):>12} {_fmt(est.half_width, 2):>10} "
            f"{_fmt(ref) if ref is not None else '-':>10}  {u}"
        )
    click.echo(f"latency p50 / p99        {_fmt(res.latency_p50)} / {_fmt(res.latency_p99)} {unit}")
    click.echo(f"throughput               {_fmt(res.throughput)} request/{unit or 'time'}")
    click.echo(
        f"requests recorded        {res.recorded} ({res.unfinished} unfinished), warm-up {_fmt(res.warmup)} {unit}"
    )
    if kind == "llm":
        click.echo(f"saturation rate          {_fmt(analytic['saturation_rate'])} request/s")
    if res.queue_growth > 0.01 * rate:
        click.echo(
            f"the queue does not drain: it grows by {_fmt(res.queue_growth)} request/"
            f"{unit or 'time'} over the second half of the run"
        )
    if plot_path:
        click.echo(f"plot written to {plot_path}")
