"""``concur bench solve``: start-up and solve wall times against bare Python and the heavy imports.

Each figure is the median of ``--runs`` fresh processes. "cold" empties concur's cache
folder first (unit facts and inverted closed forms are rebuilt); "warm" reuses it.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import click

SOLVE = ["-m", "concur.cli", "solve", "--find", "users"]
CHECK = ["-m", "concur.cli", "check"]


def _time(args: list[str], env: dict[str, str], runs: int, before: object = None) -> float:
    samples = []
    for _ in range(runs):
        if callable(before):
            before()
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@click.command()
@click.option("--runs", default=5, show_default=True, help="processes per figure (median)")
def command(runs: int) -> None:
    """Cold and warm `concur solve --find users` and `concur check` vs python -c pass / import sympy, pint."""
    cache = tempfile.mkdtemp(prefix="concur-bench-")
    env = {**os.environ, "CONCUR_CACHE_DIR": cache}

    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    bare = _time(["-c", "pass"], env, runs)
    heavy = _time(["-c", "import sympy, pint"], env, runs)
    cold = _time(SOLVE, env, runs, before=clear)
    _time(SOLVE, env, 1)
    warm = _time(SOLVE, env, runs)
    check_cold = _time(CHECK, env, runs, before=clear)
    _time(CHECK, env, 1)
    check = _time(CHECK, env, runs)
    clear()
    click.echo(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  median of {runs} processes")
    rows = [("python -c pass", bare), ("python -c 'import sympy, pint'", heavy),
            ("concur solve --find users (cold cache)", cold), ("concur solve --find users (warm cache)", warm),
            ("concur check (shipped packs, cold cache)", check_cold), ("concur check (shipped packs, warm)", check)]
    for name, t in rows:
        click.echo(f"  {name:<42} {t * 1000:8.1f} ms   {t / bare:6.1f}x bare   {t / heavy:5.2f}x sympy+pint")
    click.echo(f"targets: warm solve <= 300 ms ({'met' if warm <= 0.3 else 'MISSED'}), "
               f"check <= 500 ms (cold {'met' if check_cold <= 0.5 else 'MISSED'}, "
               f"warm {'met' if check <= 0.5 else 'MISSED'})")
