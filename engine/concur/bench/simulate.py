"""``concur bench simulate``: the M/M/c event loop against a hand-written SimPy model.

The peer is SimPy 4, the discrete-event library people reach for, running the textbook
M/M/c model as its documentation would write it: a source process drawing exponential
gaps, one process per customer that requests a ``simpy.Resource(capacity=c)``, records
its wait, holds the server for an exponential service time and releases it. concur runs
:func:`concur.analysis.simulate.simulate` on ``MMcQueue`` with the same arrival rate, service time,
servers, run length and warm-up.

Printed, from ``--runs`` interleaved runs (SimPy, concur, SimPy, concur, ...), each
simulator on its own random stream (concur seeds ``seed, seed+1, ...``, SimPy the same
plus ``PEER_SEED_OFFSET``), so that agreement is a statistical test, not a replay:

* wall seconds (median and spread) and model events per second -- an arrival and a
  departure per expected customer, ``2·rate·duration``, the same count for both
  whatever each does internally -- and the ratio (SimPy seconds / concur seconds;
  concur also computes every statistic it reports, SimPy only keeps the waits);
* the mean wait in queue of each simulator over its ``--runs`` independent runs, with a
  95 % interval: each run's batch-means half-width (customers grouped by arrival time
  into ``--batches`` slices, as ``simulate`` does), pooled as ``sqrt(sum h_i^2)/runs``;
  the Erlang C value; and whether the two simulators agree: their difference within
  the combined interval ``sqrt(h1^2 + h2^2)``. A 95 % test says DISAGREE about one
  time in twenty by chance alone: rerun with more ``--runs`` before suspecting a bug;
* a replay check, untimed: both on the *same* seed draw their random numbers in the
  same order (next gap at each arrival, service time at each admission), so they
  trace the same sample path and their mean waits must be equal to rounding.

The defaults are the ``docs/t4-littles-law.md`` case: 100 calls per 30 minutes
(0.0556 /s), 180 s service, 14 servers, 1,200,000 s (about 67,000 customers).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any

import click

from ..analysis.simulate import MAX_ARRIVALS, Estimate, MMcQueue, simulate
from ..cli.progress import progress
from ..maths.erlang import mmc
from .counter import core_count

__all__ = ["command", "simpy_mmc"]

PEER = "SimPy"
PEER_SEED_OFFSET = 1_000_003  # an independent stream for the peer in the timed runs


def simpy_mmc(
    arrival_rate: float, service_time: float, servers: int, duration: float, warmup: float, batches: int, seed: int
) -> tuple[Estimate, int]:
    """Mean wait in queue (batch means over arrivals in ``[warmup, duration)``) and how many
    customers arrived in that window, by a plain SimPy M/M/c model. Arrivals stop at ``duration``; the run goes on
    until every customer has been served, so no recorded wait is censored."""
    import simpy

    rng = random.Random(seed)
    env = simpy.Environment()
    counter = simpy.Resource(env, capacity=servers)
    width = (duration - warmup) / batches
    waits: list[list[float]] = [[] for _ in range(batches)]

    def customer(arrived: float) -> Any:
        with counter.request() as request:
            yield request
            if arrived >= warmup:
                waits[min(int((arrived - warmup) / width), batches - 1)].append(env.now - arrived)
            yield env.timeout(rng.expovariate(1.0 / service_time))

    def source() -> Any:
        while True:
            yield env.timeout(rng.expovariate(arrival_rate))
            if env.now >= duration:
                return
            env.process(customer(env.now))

    env.process(source())
    env.run()
    return Estimate.of([sum(w) / len(w) if w else math.nan for w in waits]), sum(map(len, waits))


def _concur_mmc(
    arrival_rate: float, service_time: float, servers: int, duration: float, warmup: float, batches: int, seed: int
) -> tuple[Estimate, int]:
    result = simulate(
        MMcQueue(arrival_rate, service_time, servers), duration, seed=seed, warmup=warmup, batches=batches
    )
    return result.wait, result.recorded


@click.command(name="simulate")
@click.option("--rate", type=float, default=100 / 1800, show_default=True, help="arrivals per second")
@click.option("--service-time", type=float, default=180.0, show_default=True, help="mean service, seconds")
@click.option("--servers", type=click.IntRange(1), default=14, show_default=True)
@click.option("--duration", type=float, default=1_200_000.0, show_default=True, help="simulated seconds")
@click.option("--batches", type=click.IntRange(2), default=20, show_default=True, help="batch-means slices")
@click.option("--runs", type=click.IntRange(1, 50), default=3, show_default=True, help="interleaved runs each")
@click.option("--seed", type=int, default=7, show_default=True)
def command(
    rate: float, service_time: float, servers: int, duration: float, batches: int, runs: int, seed: int
) -> None:
    """concur.analysis.simulate M/M/c vs a hand-written SimPy M/M/c: speed, and the mean wait within the CI."""
    try:
        import simpy
    except ImportError:
        raise click.ClickException("SimPy is not installed (pip install simpy): no peer to compare with") from None
    for flag, value in (("--rate", rate), ("--service-time", service_time), ("--duration", duration)):
        if not (math.isfinite(value) and value > 0):  # nan passed the load test below and SimPy never ended
            raise click.BadParameter(f"must be a finite number > 0, got {value:g}", param_hint=flag)
    if 2 * rate * duration > MAX_ARRIVALS:  # concur's own bound; SimPy's side ran first, without one
        raise click.BadParameter(
            f"rate x duration makes about {2 * rate * duration:,.0f} arrivals; a simulation takes at most "
            f"{MAX_ARRIVALS:,}",
            param_hint="--duration",
        )
    if rate * service_time >= servers:
        raise click.UsageError(f"load {rate * service_time:g} >= {servers} servers: the queue never drains")
    warmup = duration / 10
    click.echo(
        f"cores: {core_count()}; peer: {PEER} {simpy.__version__}, hand-written M/M/c; "
        f"rate {rate:g}/s, service {service_time:g} s, {servers} servers, {duration:,.0f} s "
        f"(warm-up {warmup:,.0f} s), {runs} interleaved runs"
    )
    contenders = {PEER: (simpy_mmc, PEER_SEED_OFFSET), "concur simulate": (_concur_mmc, 0)}
    times: dict[str, list[float]] = {name: [] for name in contenders}
    found: dict[str, list[tuple[Estimate, int]]] = {name: [] for name in contenders}
    with progress("simulating", total=runs * len(contenders), eager=True) as bar:
        for k in range(runs):
            for name, (run, offset) in contenders.items():
                bar.describe(f"run {k + 1} of {runs}: {name}")
                t0 = time.perf_counter()
                found[name].append(run(rate, service_time, servers, duration, warmup, batches, seed + k + offset))
                times[name].append(time.perf_counter() - t0)
                bar.advance()
    events = 2 * rate * duration  # an arrival and a departure per customer (expected)
    click.echo(
        f"\n| simulator | seconds, median (min-max) | model events/s | mean wait over {runs} runs, s "
        "(±95% CI) | customers in the window, all runs |"
    )
    click.echo("| --- | ---: | ---: | ---: | ---: |")
    pooled: dict[str, Estimate] = {}
    for name in contenders:
        med = statistics.median(times[name])
        waits = [wait for wait, _ in found[name]]
        pooled[name] = Estimate(
            statistics.fmean(w.mean for w in waits), math.sqrt(sum(w.half_width**2 for w in waits)) / runs
        )
        customers = sum(n for _, n in found[name])
        click.echo(
            f"| {name} | {med:.3f} ({min(times[name]):.3f}-{max(times[name]):.3f}) | {events / med:,.0f} "
            f"| {pooled[name].mean:.3f} (±{pooled[name].half_width:.3f}) | {customers:,} |"
        )
    analytic = mmc(rate, service_time, servers).mean_wait
    ratio = statistics.median(times[PEER]) / statistics.median(times["concur simulate"])
    a, b = pooled[PEER], pooled["concur simulate"]
    combined = math.hypot(a.half_width, b.half_width)
    agree = abs(a.mean - b.mean) <= combined
    click.echo(f"\nErlang C mean wait: {analytic:.3f} s")
    click.echo(f"ratio: {PEER} seconds / concur seconds = {ratio:.2f}x (>1: concur is faster)")
    click.echo(
        f"mean wait: concur {b.mean:.3f} vs {PEER} {a.mean:.3f}, difference {abs(a.mean - b.mean):.3f} s; "
        f"combined 95% CI ±{combined:.3f} s: {'agree' if agree else 'DISAGREE'}"
    )
    with progress("replay on one seed", eager=True):
        same_peer, _ = simpy_mmc(rate, service_time, servers, duration, warmup, batches, seed)
        same_ours, _ = _concur_mmc(rate, service_time, servers, duration, warmup, batches, seed)
    click.echo(
        f"replay, both on seed {seed}: mean wait concur {same_ours.mean:.6f} vs {PEER} {same_peer.mean:.6f} "
        f"(|difference| {abs(same_ours.mean - same_peer.mean):.1e} s: the same sample path)"
    )
