"""``concur bench erlang``: Erlang C at thousands of servers, against the textbook formula.

The budget is 1 ms for one ``erlang_c`` at c = 5,000.  Printed: the core count, the median
and spread of ``--runs`` timings for the recurrence at several server counts, the
baseline (the factorial/power-sum formula with exact big integers and fractions, the
only textbook form that does not overflow a double past c ≈ 170), and the ratio between
them, measured in the same run.  A vectorised sweep (numpy) closes the report.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from fractions import Fraction
from typing import Callable

import click

from ..maths.erlang import erlang_c, erlang_c_array

__all__ = ["command", "time_call", "textbook_erlang_c"]

BUDGET_S = 1e-3


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


@click.command(name="erlang")
@click.option("--runs", type=click.IntRange(3, 100000), default=200, show_default=True,
              help="timed calls per server count")
@click.option("--baseline-runs", type=click.IntRange(1, 100), default=1, show_default=True,
              help="timed calls of the exact textbook formula (slow)")
def command(runs: int, baseline_runs: int) -> None:
    """Time erlang_c at c = 50 ... 20,000 servers (budget: 1 ms at c = 5,000)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    click.echo(f"cores: {cores}; budget: erlang_c(5000, 4900) under {BUDGET_S * 1e3:g} ms")
    click.echo("| servers | load | P(wait) | median | min-max |")
    click.echo("| ---: | ---: | ---: | ---: | ---: |")
    at_5000 = math.nan
    for c in (50, 500, 5_000, 20_000):
        load = c * 0.98
        med, lo, hi = time_call(lambda: erlang_c(c, load), runs)
        if c == 5_000:
            at_5000 = med
        click.echo(f"| {c:,} | {load:g} | {erlang_c(c, load):.6f} | {med * 1e6:.0f} µs | "
                   f"{lo * 1e6:.0f}-{hi * 1e6:.0f} µs |")
    c, load = 5_000, 4_900
    ours = erlang_c(c, load)
    base_med, _, _ = time_call(lambda: textbook_erlang_c(c, load), baseline_runs)
    exact = textbook_erlang_c(c, load)
    click.echo(f"baseline (exact rationals, c = 5,000): {base_med * 1e3:.1f} ms; "
               f"recurrence {at_5000 * 1e6:.0f} µs; ratio {base_med / at_5000:.0f}x; "
               f"|difference| {abs(ours - exact):.1e}")
    import numpy as np

    servers = np.arange(4_901, 5_101)
    t0 = time.perf_counter()
    erlang_c_array(servers, 4_900.0)
    sweep = time.perf_counter() - t0
    click.echo(f"sweep: 200 server counts at load 4,900, one vectorised pass: "
               f"{sweep * 1e3:.1f} ms")
    verdict = "within" if at_5000 < BUDGET_S else "OVER"
    click.echo(f"erlang_c(5000, 4900): {at_5000 * 1e6:.0f} µs median, {verdict} the 1 ms budget")
