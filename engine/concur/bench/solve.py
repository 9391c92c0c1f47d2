"""``concur bench solve``: start-up and solve wall times against bare Python and the heavy imports.

Every figure is the median of ``--runs`` fresh processes, and the processes are
*interleaved*: each round runs ``python -c pass``, ``python -c 'import sympy, pint'``,
``concur solve --find users`` cold and warm, the README's headline question warm and at a rate
no earlier run asked, and ``concur check`` cold and warm, one after
the other, so a neighbour's load, a CPU frequency change or a cold disk cache hits every
contender alike. (Timing all the bare starts first and the solves afterwards put the
noise on one side: it once reported 2.8x bare Python where interleaved rounds gave ~9x.)
"cold" empties concur's cache folder first (parsed packs, unit facts and inverted closed forms
are rebuilt); "warm" reuses the cache the cold run of the same round filled.

Targets (the ratios to bare Python, so a slower or busier machine does not move them): a warm
``concur solve --find users`` within 5x ``python -c pass``, a cold one within 15x; the README's
headline question (``--find replicas,fleet_gpus,cost_per_month``) warm within 5x (a question asked
before is printed from :mod:`concur.cli.answers`; the same question at a new rate, which is
solved, is reported beside it); a warm
``concur check`` of the shipped packs (which answers from its memory of passed checks,
:mod:`concur.lang.checked`) within 10x, a cold one under a second. The children
run with Python's bytecode cache on, as an installed tool does: ``PYTHONDONTWRITEBYTECODE`` in
the environment would make every run compile concur's sources again (the untimed first run
writes the ``.pyc`` files).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import click

SOLVE = ["-m", "concur.cli", "solve", "--find", "users"]
HEADLINE = ["-m", "concur.cli", "solve", "--find", "replicas,fleet_gpus,cost_per_month"]  # README's first command


def unasked_rate(run: int) -> str:
    """``arrival_rate=50.001`` for run 0, ``50.002`` for run 1, ...: a rate no earlier run asked, so
    the question is solved, not printed from ``concur solve``'s remembered answers."""
    return f"arrival_rate={50 + (run + 1) / 1000:g}"


def new_rate(run: int) -> list[str]:
    """The headline question at an arrival rate no earlier run asked: solved, not remembered."""
    return [*HEADLINE, "--scenario", "default", "--set", f"{unasked_rate(run)} request/s"]


NEW_RATE = "headline, a rate not asked before (solved, packs warm)"
CHECK = ["-m", "concur.cli", "check"]

# (label, interpreter arguments, empty the cache first), in the order each round runs them. A warm
# contender whose question no earlier one asked runs once untimed first (its cache entries made).
CONTENDERS: list[tuple[str, list[str] | Callable[[int], list[str]], bool]] = [
    ("python -c pass", ["-c", "pass"], False),
    ("python -c 'import sympy, pint'", ["-c", "import sympy, pint"], False),
    ("concur solve --find users (cold cache)", SOLVE, True),
    ("concur solve --find users (warm cache)", SOLVE, False),
    ("headline solve (replicas,fleet_gpus,cost_per_month, warm)", HEADLINE, False),
    (NEW_RATE, new_rate, False),
    ("concur check (shipped packs, cold cache)", CHECK, True),
    ("concur check (shipped packs, warm)", CHECK, False),
]


def _once(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


@click.command()
@click.option(
    "--runs",
    default=7,
    show_default=True,
    type=click.IntRange(1, 100),
    help="interleaved rounds (median of each contender)",
)
def command(runs: int) -> None:
    """Cold and warm `concur solve --find users` and `concur check` vs python -c pass / import sympy, pint."""
    cache = tempfile.mkdtemp(prefix="concur-bench-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CONCUR_CACHE_DIR"] = cache
    samples: dict[str, list[float]] = {label: [] for label, _, _ in CONTENDERS}
    try:
        _once(SOLVE, env)  # warm the OS file cache for the interpreter and the packages, untimed
        for round_ in range(runs):
            for label, asked, cold in CONTENDERS:
                args = asked(round_) if callable(asked) else asked
                if cold:
                    shutil.rmtree(cache, ignore_errors=True)
                elif args is HEADLINE:
                    _once(args, env)  # untimed: the cold runs of this round emptied its entries
                samples[label].append(_once(args, env))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    median = {label: statistics.median(v) for label, v in samples.items()}
    bare, heavy = median["python -c pass"], median["python -c 'import sympy, pint'"]
    click.echo(
        f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  "
        f"median of {runs} interleaved rounds; peer: python -c pass (bare start-up), "
        f"python -c 'import sympy, pint'"
    )
    for label, _, _ in CONTENDERS:
        t, v = median[label], samples[label]
        click.echo(
            f"  {label:<42} {t * 1000:8.1f} ms ({min(v) * 1000:.0f}-{max(v) * 1000:.0f})   "
            f"{t / bare:6.1f}x bare   {t / heavy:5.2f}x sympy+pint"
        )
    warm = median["concur solve --find users (warm cache)"]
    first = median["concur solve --find users (cold cache)"]
    check_cold = median["concur check (shipped packs, cold cache)"]
    check = median["concur check (shipped packs, warm)"]
    headline = median["headline solve (replicas,fleet_gpus,cost_per_month, warm)"]
    fresh = median[NEW_RATE]
    click.echo(
        f"targets: solve warm <= 5x bare ({warm / bare:.1f}x, {_met(warm <= 5 * bare)}), "
        f"cold <= 15x bare ({first / bare:.1f}x, {_met(first <= 15 * bare)}); "
        f"warm solve <= 300 ms ({_met(warm <= 0.3)}); "
        f"headline warm <= 5x bare ({headline / bare:.1f}x, {_met(headline <= 5 * bare)}; "
        f"a new rate, solved: {fresh / bare:.1f}x); "
        f"check warm <= 10x bare ({check / bare:.1f}x, {_met(check <= 10 * bare)}), "
        f"cold < 1 s ({check_cold * 1000:.0f} ms, {_met(check_cold < 1.0)})"
    )


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"
