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
from typing import Any

import click

from ..options import json_option, set_option

__all__ = ["command"]


def _fmt(x: float, digits: int = 4) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else "nan"
    return f"{x:.{digits}g}"


@click.command(name="simulate")
@click.option(
    "--model",
    "kind",
    type=click.Choice(["llm", "mmc", "engine"]),
    default="llm",
    show_default=True,
    help="llm: continuous-batching fleet (fluid, the fleet formula's assumptions); mmc: plain M/M/c queue "
    "(validates Erlang C); engine: step-by-step engine scheduler timed by the throughput pack's constants.",
)
@click.option(
    "--rate",
    type=float,
    default=None,
    help="Poisson arrival rate, request/s (mmc: per unit of --service-time); required for llm and mmc.",
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
@set_option(
    help="engine: the configuration and SLOs (model=, gpu=, tp=, weight_dtype=, kv_dtype=, engine=, input_tokens=, "
    "output_tokens=; ttft_slo=, itl_slo=, ttft_p90_slo=, itl_p90_slo=, ttft_p99_slo=, itl_p99_slo=)"
)
@click.option("--concurrency", type=click.IntRange(1), default=None, help="engine: closed loop with C clients.")
@click.option(
    "--trace",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="engine: replay arrivals from a CSV or JSONL file of timestamp, input_tokens, output_tokens.",
)
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="engine: Gamma shape of the gaps between arrivals (1: Poisson; below 1: clumps, CV 1/sqrt(B)).",
)
@click.option(
    "--requests", type=click.IntRange(1), default=None, help="engine: requests recorded [default: 2000; trace: all]."
)
@click.option(
    "--warmup-requests",
    type=click.IntRange(0),
    default=None,
    help="engine: requests before the recorded ones [default: requests/4; trace: 0].",
)
@click.option(
    "--scheduler",
    type=click.Choice(["mixed", "separate"]),
    default=None,
    help="engine: mixed = decodes and prefill chunks in one step (vLLM V1); separate = prefill batches of their own "
    "(SGLang default) [default: the engine preset's prefill_overlap].",
)
@click.option(
    "--token-budget",
    type=click.IntRange(1),
    default=None,
    help="engine: tokens per step (max_num_batched_tokens) [default: the engine's token_budget].",
)
@click.option(
    "--max-num-seqs",
    type=click.IntRange(1),
    default=None,
    help="engine: batch cap per replica [default: the engine preset's].",
)
@click.option(
    "--max-events",
    type=click.IntRange(1),
    default=1_000_000,
    show_default=True,
    help="engine: stop with an error past this many events (arrivals + steps).",
)
@click.option(
    "--mode",
    type=click.Choice(["agg", "disagg"]),
    default="agg",
    show_default=True,
    help="engine: agg = replicas that prefill and decode; disagg = a prefill pool and a decode pool joined by a KV link.",
)
@click.option("--prefill-workers", type=click.IntRange(1), default=None, help="engine, disagg: prefill workers P.")
@click.option("--decode-workers", type=click.IntRange(1), default=None, help="engine, disagg: decode workers D.")
@click.option(
    "--prefill-gpu", default=None, metavar="ID", help="engine, disagg: the prefill workers' GPU [default: --set gpu]."
)
@click.option(
    "--prefill-tp",
    type=click.IntRange(1),
    default=None,
    help="engine, disagg: GPUs per prefill worker [default: --set tp].",
)
@click.option(
    "--decode-gpu", default=None, metavar="ID", help="engine, disagg: the decode workers' GPU [default: --set gpu]."
)
@click.option(
    "--decode-tp",
    type=click.IntRange(1),
    default=None,
    help="engine, disagg: GPUs per decode worker [default: --set tp].",
)
@click.option("--kv-link", default=None, metavar="ID", help="engine, disagg: the KV link, an id of the links catalog.")
@click.option(
    "--link-bandwidth",
    default=None,
    metavar="BW",
    help="engine, disagg: KV link bandwidth per GPU and direction (bare: GB/s).",
)
@click.option(
    "--link-latency", default=None, metavar="T", help="engine, disagg: KV link latency per transfer (bare: us)."
)
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
def command(**opts: Any) -> None:
    """Simulate Poisson arrivals into a serving fleet (or an M/M/c queue) and report
    latency, in-flight requests and queue length with 95% confidence intervals,
    next to the analytic answer (Little's-law fixed point or Erlang C).

    --model engine simulates an engine step by step instead (--set the configuration; --rate,
    --concurrency or --trace the load) and reports TTFT, ITL and inter-token gaps as mean and
    p50/p90/p99, throughput, and whether the waiting queue is stable; --mode disagg simulates a
    prefill pool and a decode pool joined by a KV link (--prefill-workers, --decode-workers,
    --kv-link or --link-bandwidth/--link-latency); --set draft_tokens= and acceptance_rate= (or
    spec_tokens_per_step=) simulate speculative decoding."""
    from ...errors import UsageError
    from .simulate_disagg import DISAGG_FLAGS

    layout = {k: opts.pop(k) for k in DISAGG_FLAGS}
    mode = opts.pop("mode")
    if opts["kind"] == "engine":
        _engine_model(mode, layout, **opts)
        return
    if mode != "agg" or any(v is not None for v in layout.values()):
        raise UsageError("--mode and the pools' options describe the engine model", hint="add --model engine")
    _queue_model(**opts)


def _engine_model(
    mode: str,
    layout: dict[str, Any],
    *,
    rate: float | None,
    replicas: int,
    sets: tuple[str, ...],
    concurrency: int | None,
    trace: str | None,
    burstiness: float,
    requests: int | None,
    warmup_requests: int | None,
    scheduler: str | None,
    token_budget: int | None,
    max_num_seqs: int | None,
    max_events: int,
    seed: int,
    plot_path: str | None,
    as_json: bool,
    **_: Any,
) -> None:
    """``--model engine``: an aggregated fleet (:func:`run_engine`) or a disaggregated one (:func:`run_disagg`)."""
    from ...errors import UsageError
    from .simulate_disagg import check_layout, run_disagg
    from .simulate_engine import run_engine

    if plot_path:
        raise UsageError("--plot draws the llm and mmc models only", hint="drop --plot, or use --model llm")
    check_layout(mode, layout, replicas, scheduler)
    load_args = (rate, concurrency, trace, burstiness, requests, warmup_requests)
    if mode == "disagg":
        run_disagg(sets, load_args, layout, token_budget, max_num_seqs, max_events, seed, as_json)
        return
    run_engine(
        sets, *load_args, replicas, scheduler, token_budget, max_num_seqs, max_events, seed, as_json
    )  # fmt: skip


def _queue_model(
    *,
    kind: str,
    rate: float | None,
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
    **_: Any,
) -> None:
    """``--model llm`` / ``--model mmc``: the fluid fleet or the M/M/c queue, against the analytic answer."""
    from ...analysis.simulate import LLMFleet, MMcQueue, fixed_point, plot_timeseries, simulate
    from ...errors import UsageError
    from ..progress import progress
    from ..streams import binary_output, is_stdio

    if rate is None:
        raise UsageError(f"--model {kind} needs --rate", hint="e.g. --rate 30")
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
    _print_queue(res, analytic, kind, rate, plot_path)


def _print_queue(res: Any, analytic: dict[str, float], kind: str, rate: float, plot_path: str | None) -> None:
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
