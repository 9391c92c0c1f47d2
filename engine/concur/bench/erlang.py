"""``concur bench erlang``: Erlang C and staffing against pyworkforce, the library people pick.

The peer is ``pyworkforce.queuing.ErlangC`` (the Python workforce-planning package):
its ``waiting_probability(c)`` runs the same inverse Erlang B recurrence as
:func:`concur.maths.erlang.erlang_c`, and its ``required_positions(level)`` walks the staff up
from ``round(A + 1)``, recomputing the service level from scratch at each step
(O(c) per step), where :func:`concur.maths.erlang.servers_for_service_level` carries the
recurrence forward one server at a time (O(c) in all). Printed, in one run:

1. P(wait) at c = 50 ... 20,000 servers, load 0.98·c: the median and spread of
   ``--runs`` timed calls of each, the ratio (pyworkforce ÷ concur), their largest
   difference, and, for c up to ``--exact-max``, the difference to the factorial
   formula evaluated in exact rationals (the only textbook form that does not
   overflow a double past c ≈ 170, and slow).
2. Staffing for 80 % answered within 20 s at a 180 s handling time, loads 10 ...
   4,900 erlang: both answers (the benchmark stops if they differ), both times, the ratio.
3. The budget line: ``erlang_c(5000, 4900)`` under 1 ms; and a vectorised sweep.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from fractions import Fraction
from functools import partial
from typing import Any

import click

from ..cli.progress import progress
from ..maths.erlang import erlang_c, erlang_c_array, servers_for_service_level
from .counter import core_count

__all__ = ["command", "textbook_erlang_c", "time_call"]

BUDGET_S = 1e-3
PEER = "pyworkforce ErlangC"


def textbook_erlang_c(servers: int, load: int) -> float:
    """Erlang C from ``A^c/c! · c/(c−A)`` over the power sum, in exact rationals (slow)."""
    a = Fraction(load)
    terms = [Fraction(1)]
    for k in range(1, servers):
        terms.append(terms[-1] * a / k)
    top = terms[-1] * a / servers * Fraction(servers) / (servers - a)
    return float(top / (sum(terms) + top))


def time_call(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """(median, min, max) seconds of ``runs`` calls of ``fn`` (each call timed alone)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times)


def _peer(load: float, service_time: float = 1.0, target_time: float = 1.0) -> Any:
    """A pyworkforce ``ErlangC`` whose intensity is ``load`` erlang (transactions per interval
    = load, interval = handling time), or None when pyworkforce is not installed."""
    try:
        from pyworkforce.queuing import ErlangC
    except ImportError:
        return None
    return ErlangC(transactions=load, aht=service_time, asa=target_time, interval=service_time)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs" if seconds >= 1e-5 else f"{seconds * 1e6:.1f} µs"


@click.command(name="erlang")
@click.option(
    "--runs", type=click.IntRange(3, 100000), default=200, show_default=True, help="timed calls per server count"
)
@click.option(
    "--servers",
    default="50,500,5000,20000",
    show_default=True,
    help="server counts for the P(wait) table (load 0.98 x servers)",
)
@click.option(
    "--loads", default="10,100,1000,4900", show_default=True, help="offered loads (erlang) for the staffing table"
)
@click.option(
    "--exact-max",
    type=click.IntRange(0),
    default=500,
    show_default=True,
    help="also compare with exact rationals up to this many servers (slow: ~7 s at 5,000)",
)
def command(runs: int, servers: str, loads: str, exact_max: int) -> None:
    """Erlang C and staffing vs pyworkforce (budget: erlang_c(5000, 4900) under 1 ms)."""
    counts = [int(s) for s in servers.split(",") if s.strip()]
    load_list = [float(s) for s in loads.split(",") if s.strip()]
    click.echo(
        f"cores: {core_count()}; peer: {PEER} (pyworkforce.queuing); "
        f"budget: erlang_c(5000, 4900) under {BUDGET_S * 1e3:g} ms"
    )
    if _peer(1.0) is None:
        click.echo(f"{PEER}: not installed (pip install pyworkforce); ratios not available")

    click.echo(f"\n## P(wait), median (min-max) of {runs} calls; ratio = {PEER} / concur\n")
    click.echo(
        "| servers | load | P(wait) | concur erlang_c | pyworkforce waiting_probability | ratio "
        "| abs diff to peer | abs diff to exact |"
    )
    click.echo("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in counts:
        load = c * 0.98
        with progress(f"P(wait) at {c:,} servers", eager=True):  # each row's timing, erased before it prints
            ours = erlang_c(c, load)
            med, lo, hi = time_call(partial(erlang_c, c, load), runs)
            peer = _peer(load)
            peer_cell, ratio, diff = "-", "-", "-"
            if peer is not None:
                p_med, p_lo, p_hi = time_call(partial(peer.waiting_probability, c), runs)
                peer_cell = f"{_us(p_med)} ({_us(p_lo)}-{_us(p_hi)})"
                ratio = f"{p_med / med:.2f}x"
                diff = f"{abs(ours - peer.waiting_probability(c)):.1e}"
            exact = "-"
            if c <= exact_max and load == round(load):  # the rational formula takes a whole load
                exact = f"{abs(ours - textbook_erlang_c(c, round(load))):.1e}"
        click.echo(
            f"| {c:,} | {load:g} | {ours:.6f} | {_us(med)} ({_us(lo)}-{_us(hi)}) | {peer_cell} | {ratio} "
            f"| {diff} | {exact} |"
        )

    staff_runs = max(3, runs // 20)
    click.echo(
        f"\n## Staffing: fewest servers answering 80% within 20 s, 180 s handling time; "
        f"median of {staff_runs} calls; ratio = {PEER} / concur\n"
    )
    click.echo("| load | concur servers_for_service_level | pyworkforce required_positions | servers | ratio |")
    click.echo("| ---: | ---: | ---: | ---: | ---: |")
    for load in load_list:
        with progress(f"staffing at {load:g} erlang", eager=True):
            ours_c = servers_for_service_level(load, 180.0, 20.0, 0.8)
            med, _, _ = time_call(partial(servers_for_service_level, load, 180.0, 20.0, 0.8), staff_runs)
            peer = _peer(load, 180.0, 20.0)
            theirs = None if peer is None else peer.required_positions(0.8)["raw_positions"]
            if peer is not None and theirs == ours_c:
                p_med, _, _ = time_call(partial(peer.required_positions, 0.8), staff_runs)
        if peer is None:
            click.echo(f"| {load:g} | {_us(med)} | - | {ours_c} | - |")
            continue
        if theirs != ours_c:
            raise click.ClickException(
                f"staffing at load {load:g}: concur says {ours_c}, pyworkforce {theirs}; not timing a disagreement"
            )
        click.echo(f"| {load:g} | {_us(med)} | {_us(p_med)} | {ours_c:,} | {p_med / med:.1f}x |")

    import numpy as np

    with progress("erlang_c(5000, 4900) and a vectorised sweep", eager=True):
        at_5000, _, _ = time_call(lambda: erlang_c(5_000, 4_900), runs)
        t0 = time.perf_counter()
        erlang_c_array(np.arange(4_901, 5_101), 4_900.0)
        sweep = time.perf_counter() - t0
    click.echo(f"\nsweep: 200 server counts at load 4,900, one vectorised pass: {sweep * 1e3:.1f} ms")
    verdict = "within" if at_5000 < BUDGET_S else "OVER"
    click.echo(f"erlang_c(5000, 4900): {at_5000 * 1e6:.0f} µs median, {verdict} the 1 ms budget")
