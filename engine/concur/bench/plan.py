"""``concur bench plan``: the whole default grid of ``concur plan`` against one warm ``concur solve``.

The question is the fleet question a user asks first: Llama-3.1-70B, 50 request/s of 1,000 in /
400 out, TTFT at most 2 s and ITL at most 50 ms. ``concur plan`` evaluates every catalog GPU x
TP x (weight, KV) dtype x engine for it (:mod:`concur.analysis.fleet_plan`); the peer is the
cost of asking one configuration the same question, ``concur solve --find replicas``, with a
warm cache, at an arrival rate no earlier run asked (a question asked before is printed from memory,
not solved). Target: the plan costs at most 10 single solves.

Every figure is the median of ``--runs`` fresh processes, interleaved (solve, plan, solve, plan,
...) so a neighbour's load hits both alike; the cache folder and the bytecode cache are filled by an
untimed run of each first.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import click

from .solve import unasked_rate

__all__ = ["command"]

QUESTION = [
    "--set",
    "model=llama-3.1-70b",
    "--set",
    "arrival_rate=50",
    "--set",
    "input_tokens=1000",
    "--set",
    "output_tokens=400",
    "--set",
    "ttft_slo=2 s",
    "--set",
    "itl_slo=50 ms",
]
PLAN = ["-m", "concur.cli", "plan", *QUESTION, "--json"]
SOLVE = [
    "-m",
    "concur.cli",
    "solve",
    "--find",
    "replicas",
    *QUESTION,
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "tp=4",
    "--set",
    "weight_dtype=bf16",
    "--set",
    "kv_dtype=bf16",
]


def solve_at_a_new_rate(run: int) -> list[str]:
    """The peer at an arrival rate no earlier run asked (50.001, 50.002, ... request/s): solved, not
    printed from ``concur solve``'s remembered answers (:mod:`concur.cli.answers`), which would make
    the peer a replay of text rather than a solve."""
    return [unasked_rate(run) if arg == "arrival_rate=50" else arg for arg in SOLVE]


def _once(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout


@click.command()
@click.option(
    "--runs", default=5, show_default=True, type=click.IntRange(1, 100), help="interleaved rounds (median of each)"
)
@click.option(
    "--modes",
    default="agg",
    show_default=True,
    metavar="agg[,disagg]",
    help="the plan's serving modes (concur plan --modes): agg,disagg times the disaggregated rows too",
)
@click.option(
    "--prefill-gpus",
    "prefill_gpus",
    default="",
    metavar="ID[,ID]",
    help="with a disagg mode: the plan's --prefill-gpus (each disaggregated row's prefill pool on each GPU)",
)
def command(runs: int, modes: str = "agg", prefill_gpus: str = "") -> None:
    """`concur plan` over the default grid vs one warm `concur solve --find replicas` (target <= 10x)."""
    plan_args = [*PLAN, "--modes", modes, *(["--prefill-gpus", prefill_gpus] if prefill_gpus else [])]
    cache = tempfile.mkdtemp(prefix="concur-bench-")
    # bytecode caching on, as for an installed tool (see concur bench solve)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CONCUR_CACHE_DIR"] = cache
    solves: list[float] = []
    plans: list[float] = []
    try:
        _once(SOLVE, env)  # fill the cache folder and the OS file cache, untimed
        _, out = _once(plan_args, env)
        for run in range(runs):
            solves.append(_once(solve_at_a_new_rate(run), env)[0])
            plans.append(_once(plan_args, env)[0])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    candidates = json.loads(out)["candidates"]
    feasible = sum(1 for c in candidates if c["feasible"])
    gpus = len({c["gpu"] for c in candidates})
    solve, plan = statistics.median(solves), statistics.median(plans)
    click.echo(
        f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  median of {runs} interleaved rounds; "
        "peer: one warm `concur solve --find replicas` (H100 TP4 bf16, the same question at a rate not asked before)"
    )
    click.echo(
        f"  concur solve (one configuration)   {solve * 1000:8.1f} ms ({min(solves) * 1000:.0f}-"
        f"{max(solves) * 1000:.0f})"
    )
    click.echo(
        f"  concur plan --modes {modes}{f' --prefill-gpus {prefill_gpus}' if prefill_gpus else ''} ({len(candidates)} rows, {gpus} GPUs, {feasible} feasible)"
        f"   {plan * 1000:8.1f} ms ({min(plans) * 1000:.0f}-{max(plans) * 1000:.0f})"
    )
    ratio = plan / solve
    click.echo(
        f"ratio plan / solve                  {ratio:8.2f} x  (target <= 10 x: {'met' if ratio <= 10 else 'MISSED'}; "
        f"{plan / len(candidates) * 1000:.2f} ms per configuration)"
    )
