"""``concur bench export``: time exporting a live workbook (no LibreOffice).

Baseline: the budget in the Excel issue, 2 s per export on the 2-core CI
machine. ``--plan llm`` (the default) times the whole ``concur export`` path
for the LLM capacity plan (workbooks/llm_capacity.yaml when the checkout has
it, else the T1 worked scenario of docs/t1-kv-cache.md on llm_memory): build the model, solve,
:func:`~concur.excel.from_solution.plan_from_solution`, write the xlsx.
``--plan fleet`` times ``concur export workbooks/llm_fleet.yaml`` in fresh processes (``--repeat``
interleaved rounds: cold cache, formulas printed through sympy, warm) against ``python -c 'import
openpyxl'``, wall and CPU time; target 1.5 s.
``--plan synthetic`` times only the writer on a synthetic plan shaped like the
shipped packs: 10 inputs (two in GiB), 20 derived variables chaining products,
sums, ``max``, ``floor`` and ``ceil``, one 50-point sweep and three scenarios.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import click


def synthetic_plan(n_inputs: int = 10, n_derived: int = 20, sweep_points: int = 50) -> Any:
    """A WorkbookPlan with ``n_inputs + n_derived`` variables (display values are placeholders)."""
    import sympy as sp

    from concur.excel.plan import (
        Derived,
        Input,
        Scenario,
        SheetVar,
        Sweep,
        WorkbookPlan,
    )

    inputs = []
    for i in range(n_inputs):
        unit, scale = ("GiB", 2.0**30) if i < 2 else ("", 1.0)
        inputs.append(Input(SheetVar(f"in_{i}", unit, scale, f"input {i}", bounds=(0, None)), 1.0 + i))
    syms = [sp.Symbol(f"in_{i}") for i in range(n_inputs)]
    derived = []
    for j in range(n_derived):
        a, b, c = syms[j % len(syms)], syms[(j * 7 + 3) % len(syms)], syms[(j * 3 + 1) % len(syms)]
        kind = j % 4
        expr = (
            a * b / (c + 1)
            if kind == 0
            else sp.Max(1, sp.floor(a / (b + 1)))
            if kind == 1
            else sp.ceiling(a + b * c)
            if kind == 2
            else a - b + sp.sqrt(c)
        )
        var = SheetVar(f"out_{j}", "", 1.0, f"derived {j}", integer=kind in (1, 2))
        derived.append(Derived(var, expr, f"out_{j} = {expr}", f"synthetic.yaml:{j + 1}", 1.0))
        syms.append(sp.Symbol(var.name))
    sweep = Sweep(
        "in_3",
        "in_3",
        tuple(float(k) for k in range(1, sweep_points + 1)),
        tuple(d.var.name for d in derived[-3:]),
        "in_3",
        "outputs",
        "synthetic sweep",
    )
    scenarios = [Scenario(f"s{k}", {f"in_{k}": 2.0 + k}) for k in range(3)]
    return WorkbookPlan(
        "synthetic", "benchmark plan", inputs=inputs, derived=derived, sweeps=[sweep], scenarios=scenarios
    )


_T1 = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "tp": 4,
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "context": "8192 token",
    "overhead": "4 GiB",
    "mem_util": 0.9,
}


def _workbook_definition(name: str) -> Path | None:
    """``workbooks/NAME`` of the source checkout this module runs from; None in an installed wheel."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "workbooks" / name
        if candidate.is_file():
            return candidate
    return None


def _llm_export(path: Path) -> tuple[Any, str]:
    """Solve the LLM capacity plan and write it; (plan, description)."""
    from concur.excel.writer import write_workbook

    definition = _workbook_definition("llm_capacity.yaml")
    if definition is not None:
        from concur.excel.definition import load_definition, plan_for, solve_definition

        defn = load_definition(definition)
        model, sol = solve_definition(defn)
        plan = plan_for(model, sol, defn.title, defn.sweeps, defn.scenarios, doc=defn.doc)
        what = f"{definition.parent.name}/{definition.name}"
    else:
        from concur.excel.from_solution import plan_from_solution
        from concur.lang.model import build_model
        from concur.solver.question import solve_model

        sol = solve_model(build_model(["llm_memory"]), ("users",), dict(_T1))
        plan = plan_from_solution(sol, "LLM capacity (T1)")
        what = "llm_memory T1 scenario"
    write_workbook(plan, path)
    return plan, what


def _run_llm(repeat: int) -> None:
    budget = 2.0
    t_cold = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="concur-bench-") as tmp:
        path = Path(tmp) / "bench.xlsx"
        plan, what = _llm_export(path)
        cold = time.perf_counter() - t_cold
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            _llm_export(path)
            times.append(time.perf_counter() - t0)
        size = path.stat().st_size
    median = statistics.median(times)
    click.echo(f"cores: {os.cpu_count()}")
    click.echo(
        f"plan: {what}: {len(plan.inputs)} inputs, {len(plan.derived)} derived, "
        f"{len(plan.sweeps)} sweeps, {len(plan.scenarios)} scenarios; workbook {size / 1024:.0f} KiB"
    )
    click.echo(f"solve + plan + write median {median * 1000:.1f} ms, min {min(times) * 1000:.1f} ms over {repeat} runs")
    click.echo(f"first export including imports {cold:.2f} s")
    click.echo(f"baseline (issue budget): {budget:.1f} s; ratio budget/median = {budget / median:.1f}x")


def _run_fleet(runs: int) -> None:
    """``concur export workbooks/llm_fleet.yaml`` in fresh processes, interleaved with ``python -c
    pass`` and ``python -c 'import openpyxl'`` (the peer: the least an xlsx writer costs), medians
    of wall time and of CPU time (the child's user + system, from ``getrusage``: on a loaded
    machine the wall time also counts waiting for a core). "warm" reuses the cache folder its
    untimed first run filled (the workbook's plan and printed formulas replayed, no sympy:
    :mod:`concur.excel.memo`); "printed" removes only the remembered workbook plans first (the
    question solved and every formula printed through sympy; the fleet plan and the solver's
    loops still remembered); "cold" empties the folder first."""
    import shutil

    definition = _workbook_definition("llm_fleet.yaml")
    if definition is None:
        raise click.UsageError("workbooks/llm_fleet.yaml is not in this checkout")
    cache = tempfile.mkdtemp(prefix="concur-bench-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["CONCUR_CACHE_DIR"] = cache
    out = Path(cache).with_suffix(".xlsx")
    export = ["-m", "concur.cli", "export", str(definition), "-o", str(out)]
    contenders = [
        (_BARE, ["-c", "pass"], None),
        (_PEER, ["-c", "import openpyxl"], None),
        ("concur export llm_fleet.yaml (cold cache)", export, Path(cache)),
        (_PRINTED, export, Path(cache) / "workbooks"),
        (_WARM, export, None),
    ]
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in contenders}
    try:
        _timed(export, env)  # untimed: the OS file cache, the .pyc files
        for _ in range(runs):
            for label, args, emptied in contenders:
                if emptied is not None:
                    shutil.rmtree(emptied, ignore_errors=True)
                samples[label].append(_timed(args, env))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        out.unlink(missing_ok=True)
    _report_fleet(runs, samples)


_BARE, _PEER = "python -c pass", "python -c 'import openpyxl'"
_WARM, _PRINTED = "concur export llm_fleet.yaml (warm)", "concur export llm_fleet.yaml (printed)"
_FLEET_TARGET = 1.5  # seconds, wall, warm: the budget of issue 26


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python ARGS`` in a fresh process; CPU is the child's user + system."""
    import resource
    import subprocess
    import sys

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _report_fleet(runs: int, samples: dict[str, list[tuple[float, float]]]) -> None:
    """The medians, each against ``import openpyxl`` and ``python -c pass``, and the target line."""
    wall = {label: statistics.median(w for w, _ in v) for label, v in samples.items()}
    cpu = {label: statistics.median(c for _, c in v) for label, v in samples.items()}
    click.echo(f"cores: {os.cpu_count()}  median of {runs} interleaved rounds; peer: {_PEER}")
    click.echo(f"  {'':<44} {'wall':>9}   {'CPU':>9}   {'wall / peer':>11}   {'CPU / peer':>10}")
    for label in samples:
        click.echo(
            f"  {label:<44} {wall[label] * 1000:6.0f} ms   {cpu[label] * 1000:6.0f} ms   "
            f"{wall[label] / wall[_PEER]:10.1f}x   {cpu[label] / cpu[_PEER]:9.1f}x"
        )
    for label in (_WARM, _PRINTED):
        w, c = wall[label], cpu[label]
        click.echo(
            f"target: {label[len('concur export ') :]} <= {_FLEET_TARGET} s wall: {w:.2f} s wall, {c:.2f} s CPU, "
            f"{'met' if w <= _FLEET_TARGET else 'MISSED'} ({w / wall[_PEER]:.1f}x {_PEER} wall, "
            f"{c / cpu[_PEER]:.1f}x CPU)"
        )


@click.command("export")
@click.option("--repeat", default=10, show_default=True, help="timed exports")
@click.option(
    "--plan",
    "which",
    type=click.Choice(["llm", "synthetic", "fleet"]),
    default="llm",
    show_default=True,
    help="llm: solve + write the LLM capacity plan; synthetic: the writer alone; fleet: "
    "`concur export workbooks/llm_fleet.yaml` in fresh processes against `import openpyxl`",
)
@click.option("--variables", default=30, show_default=True, help="inputs + derived variables (synthetic plan)")
def command(repeat: int, which: str, variables: int) -> None:
    """Time exporting the LLM capacity plan (or a synthetic plan of VARIABLES variables)."""
    if which == "llm":
        _run_llm(max(1, repeat))
        return
    if which == "fleet":
        _run_fleet(max(1, repeat))
        return
    t_import = time.perf_counter()
    from concur.excel.writer import write_workbook

    n_inputs = max(2, variables // 3)
    plan = synthetic_plan(n_inputs, max(1, variables - n_inputs))
    budget = 2.0
    with tempfile.TemporaryDirectory(prefix="concur-bench-") as tmp:
        path = Path(tmp) / "bench.xlsx"
        t_first = time.perf_counter()
        write_workbook(plan, path)  # first export: cold sympy/openpyxl caches
        first = time.perf_counter() - t_first
        cold = time.perf_counter() - t_import
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            write_workbook(plan, path)
            times.append(time.perf_counter() - t0)
        size = path.stat().st_size
    median = statistics.median(times)
    click.echo(f"cores: {os.cpu_count()}")
    click.echo(f"plan: {variables} variables, 1 sweep x 50 points, 3 scenarios; workbook {size / 1024:.0f} KiB")
    click.echo(f"export median {median * 1000:.1f} ms, min {min(times) * 1000:.1f} ms over {repeat} runs")
    click.echo(f"first export {first * 1000:.0f} ms; imports + plan + first export {cold:.2f} s")
    click.echo(f"baseline (issue budget): {budget:.1f} s; ratio budget/median = {budget / median:.1f}x")
