"""``concur bench enginesim``: the engine-level simulator's speed, in events and steps per second.

The workload is a stable open loop a user would simulate first: Llama-3.1-8B on one H100 under
the vLLM preset, Poisson arrivals of 1,000-token prompts and 400-token answers, ``--requests``
recorded after a quarter as many of warm-up (``concur simulate --model engine``'s defaults).
Both schedulers run (mixed and separate prefill).

Two references, measured in the same run:

* the budget issue 21 sets -- "a 2,000-request simulation should take well under a few seconds",
  read as ``--budget`` seconds (2 by default) -- printed as ``budget / median``;
* the same simulator with coalescing off (``coalesce=False``: every decode step its own event,
  the results identical), printed as ``one-by-one seconds / coalesced seconds``.

A third row times the disaggregated simulator (:mod:`concur.analysis.enginesim_disagg`) on the same
traffic: one prefill and one decode worker of the same GPU, KV over a 50 GB/s, 10 us link, with
its own one-by-one peer (``coalesce=False``).

Every figure is the median of ``--runs`` interleaved runs (one-by-one, coalesced, ...) in this
process; the step model is solved once, untimed.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any

import click

from ..analysis.arrivals import Synthetic
from ..analysis.enginesim import EngineSimResult, simulate_engine
from ..analysis.enginesim_disagg import KVLink, simulate_disagg, solve_pools
from ..analysis.step_model import solve_engine
from ..cli.progress import progress
from .counter import core_count

__all__ = ["command"]

CONFIG = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "engine": "vllm", "input_tokens": 1000, "output_tokens": 400}


@click.command(name="enginesim")
@click.option("--requests", type=click.IntRange(1), default=2000, show_default=True, help="requests recorded")
@click.option("--rate", type=float, default=4.0, show_default=True, help="Poisson arrivals, request/s")
@click.option("--runs", type=click.IntRange(1, 50), default=3, show_default=True, help="interleaved runs each")
@click.option("--budget", type=float, default=2.0, show_default=True, help="seconds a run may take (issue 21)")
@click.option("--seed", type=int, default=1, show_default=True)
def command(requests: int, rate: float, runs: int, budget: float, seed: int) -> None:
    """The engine simulator: events/s and steps/s, against its budget and against one-by-one steps."""
    step, limits, _ = solve_engine(CONFIG)
    warmup = requests // 4
    click.echo(
        f"cores: {core_count()}; baseline (issue budget): {budget:g} s for {requests:,} requests; peer: the same "
        f"simulator one step per event; Llama-3.1-8B on H100 (vllm), {rate:g} request/s Poisson, 1,000 in / 400 out, "
        f"{requests:,} requests after {warmup:,} warm-up, {runs} interleaved runs"
    )
    click.echo(
        "\n| scheduler | coalesced s, median (min-max) | events/s | steps/s | one-by-one s | events | "
        "ratio one-by-one / coalesced | ratio budget / median |"
    )
    click.echo("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with progress("simulating", total=2 * runs * 2 + 2 * runs, eager=True) as bar:
        for mixed in (True, False):
            lim = replace(limits, mixed=mixed)
            times: dict[bool, list[float]] = {True: [], False: []}
            last: dict[bool, EngineSimResult] = {}
            for _ in range(runs):
                for coalesce in (False, True):
                    t0 = time.perf_counter()
                    last[coalesce] = simulate_engine(
                        step,
                        lim,
                        Synthetic(rate, 1000, 400, seed=seed),
                        requests=requests,
                        warmup=warmup,
                        coalesce=coalesce,
                    )
                    times[coalesce].append(time.perf_counter() - t0)
                    bar.advance()
            fast, slow = statistics.median(times[True]), statistics.median(times[False])
            res = last[True]
            click.echo(
                f"| {res.engine} | {fast:.3f} ({min(times[True]):.3f}-{max(times[True]):.3f}) | {res.events / fast:,.0f} "
                f"| {res.steps / fast:,.0f} | {slow:.3f} | {res.events:,} / {last[False].events:,} | {slow / fast:.2f}x "
                f"| {budget / fast:.2f}x |"
            )
        click.echo(_disagg_row(requests, warmup, rate, runs, budget, seed, bar.advance))
    click.echo("\nevents: arrivals and step ends (coalesced / one by one); steps/s: simulated engine steps per second")


def _disagg_row(requests: int, warmup: int, rate: float, runs: int, budget: float, seed: int, advance: Any) -> str:
    """The disaggregated simulator on the same traffic (1 prefill + 1 decode worker), coalesced and one
    by one, interleaved: one table row."""
    prefill, decode, kv_bytes, _ = solve_pools(CONFIG, {"workers": 1}, {"workers": 1})
    link = KVLink(50e9, 10e-6)
    times: dict[bool, list[float]] = {True: [], False: []}
    last: dict[bool, EngineSimResult] = {}
    for _ in range(runs):
        for coalesce in (False, True):
            t0 = time.perf_counter()
            last[coalesce] = simulate_disagg(
                prefill, decode, link, Synthetic(rate, 1000, 400, seed=seed), kv_bytes=kv_bytes,
                requests=requests, warmup=warmup, seed=seed, coalesce=coalesce,
            )  # fmt: skip
            times[coalesce].append(time.perf_counter() - t0)
            advance()
    fast, slow = statistics.median(times[True]), statistics.median(times[False])
    res = last[True]
    return (
        f"| disagg 1P1D | {fast:.3f} ({min(times[True]):.3f}-{max(times[True]):.3f}) | {res.events / fast:,.0f} | "
        f"{res.steps / fast:,.0f} | {slow:.3f} | {res.events:,} / {last[False].events:,} | {slow / fast:.2f}x | "
        f"{budget / fast:.2f}x |"
    )
