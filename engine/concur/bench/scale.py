"""``concur bench scale``: a 1,000-equation chain solved backwards against the same chain forwards.

The chain ``x_i = x_{i-1} + d`` (i = 1..N) is asked forwards (``x_N`` from ``x0`` and ``d``:
every step evaluates one expression) and backwards (``x0`` from ``x_N`` and ``d``: every step
inverts its equation by isolation, without sympy). Backwards must stay within 10x of forwards.
The two-term recurrence ``x_i = x_{i-1} + x_{i-2}`` (i = 2..M) is asked backwards (``x0`` from the
last two) and across (``x1`` from ``x0`` and ``x_M``: one loop of M - 1 unknowns, a linear system).

Every figure is the median of ``--runs`` rounds, and each round runs every contender in its own
process, one after the other (interleaved, so a neighbour's load hits them alike). Inside a
process three times are taken: building the model (parsing the pack, or reading it from the
cache), the first solve (compiling the plan, then running it) and a second solve (the plan
cached in the process). "cold" empties concur's cache folder first; "warm" reuses what the cold
run of the same round left there. Each answer is checked against the exact value.

The packs are generated here (:func:`chain_pack`, :func:`recurrence_pack`) within the YAML
limits of one file (:data:`concur.lang.yamlsafe.MAX_NODES`, :data:`~concur.lang.yamlsafe.MAX_BYTES`);
the tests solve the same packs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

__all__ = ["chain_pack", "chain_value", "command", "recurrence_back", "recurrence_pack", "recurrence_values"]

UNIT = "token"  # a unit of the shipped unit table: generating the packs' units needs no pint


def chain_pack(n: int, name: str = "chain") -> str:
    """A pack of ``n`` equations ``x_i = x_{i-1} + d``."""
    lines = [
        f"pack: {name}",
        f"doc: a chain of {n} equations x_i = x_(i-1) + d",
        "variables:",
        f"  d: {{unit: {UNIT}}}",
    ]
    lines += [f"  x{i}: {{unit: {UNIT}}}" for i in range(n + 1)]
    lines += ["equations:"] + [f"  - x{i} = x{i - 1} + d" for i in range(1, n + 1)]
    return "\n".join(lines) + "\n"


def recurrence_pack(n: int, name: str = "recurrence") -> str:
    """A pack of ``n - 1`` equations ``x_i = x_{i-1} + x_{i-2}`` (i = 2..n)."""
    lines = [f"pack: {name}", f"doc: the two-term recurrence x_i = x_(i-1) + x_(i-2) up to x{n}", "variables:"]
    lines += [f"  x{i}: {{unit: {UNIT}}}" for i in range(n + 1)]
    lines += ["equations:"] + [f"  - x{i} = x{i - 1} + x{i - 2}" for i in range(2, n + 1)]
    return "\n".join(lines) + "\n"


def chain_value(x0: float, d: float, n: int) -> float:
    return x0 + n * d


def recurrence_values(x0: int, x1: int, n: int) -> list[int]:
    """The exact recurrence (Python integers) from its first two values."""
    xs = [x0, x1]
    while len(xs) <= n:
        xs.append(xs[-1] + xs[-2])
    return xs


def recurrence_back(last: int, before: int, n: int) -> list[int]:
    """The exact recurrence (Python integers) from its last two values ``x_n``, ``x_{n-1}``, back to ``x0``.

    Backwards the recurrence grows like 1.618^k with alternating signs, so starting from small
    integers (1, 1) the float solve is accurate to rounding; starting from the forward sequence's
    rounded ``x_n`` it would not be (the error grows as fast as the values shrink)."""
    xs = {n: last, n - 1: before}
    for i in range(n, 1, -1):
        xs[i - 2] = xs[i] - xs[i - 1]
    return [xs[i] for i in range(n + 1)]


def _questions(n: int, m: int) -> dict[str, tuple[str, str, dict[str, float], float]]:
    """label -> (pack file stem, target, givens, exact answer)."""
    fib = recurrence_values(3, 5, m)
    return {
        "chain forward": ("chain", f"x{n}", {"x0": 7.0, "d": 2.0}, chain_value(7.0, 2.0, n)),
        "chain backward": ("chain", "x0", {f"x{n}": chain_value(7.0, 2.0, n), "d": 2.0}, 7.0),
        "recurrence backward": (
            "recurrence",
            "x0",
            {f"x{m}": 1.0, f"x{m - 1}": 1.0},
            float(recurrence_back(1, 1, m)[0]),
        ),
        "recurrence loop": ("recurrence", "x1", {"x0": 3.0, f"x{m}": float(fib[m])}, 5.0),
    }


def _child() -> None:
    """One contender in a fresh process: times model build, first solve, second solve (JSON out)."""
    import time

    path, target, given = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    from concur.api import load_model
    from concur.errors import ConcurError
    from concur.solver.question import solve_model

    t0 = time.perf_counter()
    model = load_model(path)
    t1 = time.perf_counter()
    out: dict[str, Any] = {"model": t1 - t0}
    try:
        sol = solve_model(model, (target,), given)
        t2 = time.perf_counter()
        solve_model(model, (target,), given)
        t3 = time.perf_counter()
        out.update(first=t2 - t1, again=t3 - t2, value=sol.value(target))
    except ConcurError as exc:
        out.update(first=time.perf_counter() - t1, again=0.0, error=str(exc).splitlines()[0][:200])
    out["sympy"] = "sympy" in sys.modules
    print(json.dumps(out))


def _run(pack: Path, target: str, given: dict[str, float], env: dict[str, str]) -> dict[str, Any]:
    code = "from concur.bench.scale import _child; _child()"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(pack), target, json.dumps(given)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise click.ClickException(f"{pack.name} --find {target} failed: {proc.stderr.strip()[-400:]}")
    sample: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])  # _child prints one JSON object
    return sample


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


@click.command()
@click.option(
    "--runs",
    default=5,
    show_default=True,
    type=click.IntRange(1, 50),
    help="interleaved rounds (median of each contender)",
)
@click.option("--size", default=1000, show_default=True, type=click.IntRange(10, 3000), help="equations in the chain")
@click.option(
    "--recurrence",
    default=300,
    show_default=True,
    type=click.IntRange(10, 600),
    help="last index of the two-term recurrence",
)
def command(runs: int, size: int, recurrence: int) -> None:
    """A chain of --size equations solved backwards vs forwards (target: <= 10x), and the recurrence."""
    folder = Path(tempfile.mkdtemp(prefix="concur-bench-scale-"))
    cache = folder / "cache"
    env = {**os.environ, "CONCUR_CACHE_DIR": str(cache)}
    (folder / "chain.yaml").write_text(chain_pack(size), encoding="utf-8")
    (folder / "recurrence.yaml").write_text(recurrence_pack(recurrence), encoding="utf-8")
    questions = _questions(size, recurrence)
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for _ in range(runs):
            for label, (stem, target, given, _exact) in questions.items():
                for state in ("cold", "warm"):
                    if state == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                    samples.setdefault((label, state), []).append(_run(folder / f"{stem}.yaml", target, given, env))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    def median(label: str, state: str, key: str) -> float:
        seconds: float = statistics.median(s[key] for s in samples[(label, state)])
        return seconds

    click.echo(
        f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}  median of {runs} interleaved rounds, "
        f"one process each; peer: the same chain solved forwards"
    )
    click.echo(f"  {'question':<38} {'model':>11} {'1st solve':>11} {'2nd solve':>11}  answer")
    for label, (_stem, target, _given, exact) in questions.items():
        for state in ("cold", "warm"):
            last = samples[(label, state)][-1]
            if "error" in last:
                answer = f"refused: {last['error']}"
            else:
                ok = abs(last["value"] - exact) <= 1e-6 * max(abs(exact), 1.0)
                answer = f"{target} = {last['value']:.10g} ({'exact' if ok else f'WRONG, expected {exact:.10g}'})"
            if last["sympy"]:
                answer += " [imported sympy]"
            click.echo(
                f"  {label + f' ({state} cache)':<38} {_ms(median(label, state, 'model'))} "
                f"{_ms(median(label, state, 'first'))} {_ms(median(label, state, 'again'))}  {answer}"
            )
    worst = 0.0
    for state in ("cold", "warm"):
        parts = []
        for key, what in (("first", "1st solve"), ("again", "2nd solve")):
            ratio = median("chain backward", state, key) / median("chain forward", state, key)
            worst = max(worst, ratio)
            parts.append(f"{what} {ratio:.2f}x")
        total = sum(median("chain backward", state, k) for k in ("model", "first")) / sum(
            median("chain forward", state, k) for k in ("model", "first")
        )
        worst = max(worst, total)
        click.echo(f"backward / forward, {state} cache: {', '.join(parts)}, model + 1st solve {total:.2f}x")
    click.echo(f"target: backward <= 10x forward ({'met' if worst <= 10 else 'MISSED'}, worst {worst:.2f}x)")
