"""concur.sweep.vector and `concur sweep`: vectorised answers equal per-point solves; NaN on violations."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from concur.cli import cli, main
from concur.cli.ranges import parse_range
from concur.errors import InfeasibleError, UnderdeterminedError, UsageError
from concur.lang.model import build_model
from concur.solver.question import solve_model
from concur.sweep.vector import require_fixed, sweep

BASE = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "input_tokens": 1024,
    "output_tokens": 2048,
}
MEM = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "weight_dtype": "bf16",
    "kv_dtype": "bf16",
    "context": "8192 token",
}


@pytest.fixture(scope="module")
def throughput():
    return build_model(["llm_throughput"])


def test_design_numbers(throughput):
    outs = ["t_step", "bound_tokens_per_s"]
    r = sweep(throughput, {"concurrency": [1, 64]}, {**BASE, "efficiency": 1, "t_fixed": 0}, outs)
    assert r.method == "vector"
    assert r["t_step"] == pytest.approx([4.874, 9.922], rel=1e-3)
    assert r["bound_tokens_per_s"][1] == pytest.approx(6450.1, rel=1e-3)


@pytest.mark.parametrize("seed", [1, 2])
def test_equals_per_point_solve(throughput, seed):
    rng = random.Random(seed)
    c = [rng.uniform(1, 900) for _ in range(6)]
    eff = rng.uniform(0.3, 1.0)
    given = {**BASE, "efficiency": eff, "tp": 2}
    outs = ["t_step", "tokens_per_s_per_gpu", "bound_tokens_per_s", "ttft", "served_tokens_per_s"]
    r = sweep(throughput, {"concurrency": c}, given, outs)
    refused = 0
    for i, ci in enumerate(c):
        try:
            sol = solve_model(throughput, tuple(outs), {**given, "concurrency": f"{ci!r} request"})
        except InfeasibleError:  # more requests than the KV pool holds: the sweep leaves a gap there
            refused += 1
            assert all(np.isnan(r[o][i]) for o in outs)
            continue
        for o in outs:
            assert r[o][i] == pytest.approx(sol.value(o), rel=1e-9), o
    assert refused == r.nan_points() < len(c)


def test_inverted_block_uses_closed_form():
    model = build_model(["littles_law"])
    r = sweep(model, {"in_flight": [10, 100, 1234.5]}, {"arrival_rate": 5}, ["residence_time"])
    assert r.method == "vector"  # in_flight = arrival_rate * residence_time, inverted once by sympy
    for i, x in enumerate([10, 100, 1234.5]):
        sol = solve_model(model, ("residence_time",), {"arrival_rate": 5, "in_flight": x})
        assert r["residence_time"][i] == pytest.approx(sol.value("residence_time"), rel=1e-9)


def test_fallback_equals_solve():
    # concurrency from t_step inverts through max(): per point, same answers as solve
    model = build_model(["llm_throughput"])
    given = {**BASE, "efficiency": 1, "t_fixed": 0}
    r = sweep(model, {"t_step": [5.0, 9.0, 30.0]}, given, ["concurrency"])
    for i, t in enumerate([5.0, 9.0]):
        sol = solve_model(model, ("concurrency",), {**given, "t_step": f"{t} ms"})
        assert r["concurrency"][i] == pytest.approx(sol.value("concurrency"), rel=1e-9)
    # a 30 ms step would batch ~315 requests of 3,072 tokens: the KV pool holds 139
    with pytest.raises(InfeasibleError, match="KV pool holds whole"):
        solve_model(model, ("concurrency",), {**given, "t_step": "30 ms"})
    assert np.isnan(r["concurrency"][2])
    [key] = r.violations
    assert key.startswith("constraint 'kv_fit") and r.violations[key] == 1


def test_grid_and_violations_are_nan(throughput):
    r = sweep(
        throughput,
        {"tp": [1, 3, 4, 8], "mem_util": [0.5, 0.9]},
        {**MEM, "input_tokens": 1024, "output_tokens": 1024, "concurrency": 32},
        ["users", "t_step"],
    )
    assert r["users"].shape == (4, 2)
    assert np.isnan(r["users"][0]).all()  # 70B bf16 does not fit on one GPU
    assert np.isnan(r["users"][1]).all()  # tp 3 does not divide 64 heads
    # tp 4 at half memory holds 4 users of 8192 tokens: 32 requests of 2048 tokens do not fit its KV pool
    assert np.isnan(r["users"][2, 0]) and r["users"][2, 1] == 55
    assert r["users"][3, 1] == 162
    assert r.violations["kv_pool"] >= 2 and any("does not fit" in m for m in r.messages)
    assert sum(v for k, v in r.violations.items() if k.startswith("constraint 'kv_fit")) == 1
    assert any("KV pool holds whole" in m for m in r.messages)
    assert r.nan_points() == 5


def test_categorical_and_search_fallback():
    model = build_model(["llm_memory"])
    r = sweep(
        model, {"kv_dtype": ["bf16", "fp8"]}, {**{k: v for k, v in MEM.items() if k != "kv_dtype"}, "tp": 4}, ["users"]
    )
    assert r["users"].tolist() == [55, 110]
    r = sweep(model, {"users": [10, 100]}, MEM, ["tp"])
    assert r.method == "per-point" and r["tp"].tolist() == [4, 8]


def test_four_fixed_variables(throughput):
    with pytest.raises(UnderdeterminedError, match="output length"):
        sweep(throughput, {"concurrency": [1]}, {k: v for k, v in BASE.items() if k != "output_tokens"}, ["t_step"])
    with pytest.raises(UnderdeterminedError, match="offered load"):
        require_fixed(throughput, set(BASE), ["tokens_per_s"])
    require_fixed(throughput, set(BASE) | {"concurrency"}, ["tokens_per_s"])
    require_fixed(throughput, set(), ["users"])  # not a throughput question


def test_parse_range():
    assert parse_range("concurrency=1..8:4") == ("concurrency", [1.0, 8.0, 4], True)
    assert parse_range("kv_dtype=bf16,fp8") == ("kv_dtype", ["bf16", "fp8"], False)
    for bad in ("concurrency", "c=1..x", "c=1..2:0"):
        with pytest.raises(UsageError):
            parse_range(bad)


ARGS = [
    "sweep",
    "llm_throughput",
    "--set",
    "model=llama-3.1-8b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "input_tokens=1024",
    "--set",
    "output_tokens=2048",
]


def test_cli_table_csv_json_png(tmp_path):
    runner = CliRunner()
    csv_path, png = tmp_path / "s.csv", tmp_path / "s.png"
    res = runner.invoke(
        cli,
        ARGS
        + [
            "--over",
            "concurrency=1..256:5",
            "--log",
            "--find",
            "tokens_per_s_per_gpu",
            "--compare",
            "kv_dtype=bf16,fp8",
            "--csv",
            str(csv_path),
            "--plot",
            str(png),
        ],
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(csv_path.open()))
    assert rows[0] == ["config", "concurrency [request]", "tokens_per_s_per_gpu [token/s]"] and len(rows) == 11
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = runner.invoke(
        cli,
        ARGS
        + ["--over", "concurrency=1,64", "--find", "t_step", "--json", "--set", "efficiency=1", "--set", "t_fixed=0"],
    )
    doc = json.loads(res.output)
    assert doc["runs"][0]["columns"]["t_step"] == pytest.approx([4.874, 9.922], rel=1e-3)


def test_cli_refuses_missing_fixed():
    res = CliRunner().invoke(cli, ARGS[:6] + ["--over", "concurrency=1,2", "--find", "t_step"])
    assert res.exit_code != 0 and isinstance(res.exception, UnderdeterminedError)
    assert res.exception.exit_code == 2 and "input length" in str(res.exception)


# ---------------------------------------------------------------- speed work: folding and the fast pass


def test_fold_agrees_with_the_compiled_formula(throughput):
    from concur.lang.expr import compile_node, names_in
    from concur.sweep.partial import Const, fold

    rng = np.random.default_rng(3)
    for eq in throughput.equations:
        names = sorted(names_in(eq.rhs))
        if not names or any(throughput.variables[n].choices for n in names):
            continue
        env = {n: rng.uniform(0.5, 2.0) for n in names}
        arrays = {names[0]: rng.uniform(0.5, 2.0, 7)}
        scalars = {n: v for n, v in env.items() if n not in arrays}
        with np.errstate(invalid="ignore"):  # a random input may leave a function's domain in a
            # branch if_ discards: both sides see it, as the sweep's own errstate does
            want = compile_node(eq.rhs, vector=True)({**env, **arrays})
            got = fold(eq.rhs, scalars)
            got = got.value if isinstance(got, Const) else got(dict(arrays))
        assert np.allclose(got, want, rtol=1e-12, atol=0), eq.text
        assert isinstance(fold(eq.rhs, env), Const)  # nothing varies: one number


def test_fast_pass_falls_back_on_a_flag(throughput):
    # bandwidth 0 divides by zero (the step's memory time and the weights' read time): that point is
    # NaN and counted, the others equal the solver
    given = {**BASE, "concurrency": 8}
    r = sweep(throughput, {"hbm_bandwidth": [3.35, 0.0, 2.0]}, given, ["t_step", "tokens_per_s"])
    assert (
        np.isnan(r["t_step"][1])
        and np.isnan(r["tokens_per_s"][1])
        and r.violations == {"memory_time": 1, "weights_time": 1}
    )
    for i in (0, 2):
        bw = r["hbm_bandwidth"][i]
        sol = solve_model(throughput, ("t_step",), {**given, "hbm_bandwidth": f"{bw} TB/s"})
        assert r["t_step"][i] == pytest.approx(sol.value("t_step"), rel=1e-9)


def test_outputs_never_alias_each_other_or_the_input(throughput):
    c = np.array([1.0, 2.0, 4.0])
    r = sweep(throughput, {"concurrency": c}, BASE, ["t_step", "itl"])
    assert not np.shares_memory(r["t_step"], r["itl"])
    r["itl"][0] = -1.0
    assert r["t_step"][0] > 0 and c[0] == 1.0


# ---------------------------------------------------------------- the four fixed variables in solve

SOLVE = [
    "solve",
    "llm_throughput",
    "--find",
    "tokens_per_s",
    "--set",
    "model=llama-3.1-8b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "input_tokens=1024",
    "--set",
    "output_tokens=2048",
]


@pytest.mark.parametrize(
    "drop, missing",
    [
        ("input_tokens=1024", "input length"),
        ("output_tokens=2048", "output length"),
        ("model=llama-3.1-8b", "configuration (model"),
        ("gpu=h100-sxm-80gb", "configuration (GPU"),
    ],
)
def test_solve_refuses_each_missing_fixed_variable(drop, missing, capsys):
    args = [a for a in SOLVE if a != drop]
    args = [a for i, a in enumerate(args) if not (a == "--set" and (i + 1 == len(args) or args[i + 1] == "--set"))]
    with pytest.raises(SystemExit) as stop:
        main(args + ["--set", "concurrency=8"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and missing in err and err.count("\n") == 1


def test_solve_refuses_missing_offered_load_and_api_agrees(capsys):
    import concur

    with pytest.raises(SystemExit) as stop:
        main(SOLVE)
    assert stop.value.code == 2 and "offered load (concurrency or request_rate)" in capsys.readouterr().err
    with pytest.raises(UnderdeterminedError, match="offered load") as exc:
        concur.solve("tokens_per_s", {**BASE}, packs="llm_throughput")
    assert exc.value.missing == ("concurrency",)
    assert concur.solve("tokens_per_s", {**BASE, "concurrency": 64}, packs="llm_throughput").value("tokens_per_s") > 0


def test_request_rate_gives_concurrency_by_littles_law(throughput):
    import concur

    sol = concur.solve(
        "concurrency,tokens_per_s,latency", {**BASE, "request_rate": "0.5 request/s"}, packs="llm_throughput"
    )
    c, latency = sol.value("concurrency"), sol.value("latency")
    assert c == pytest.approx(0.5 * latency, rel=1e-6)  # L = lambda x W
    back = solve_model(throughput, ("request_rate", "tokens_per_s"), {**BASE, "concurrency": f"{c!r} request"})
    assert back.value("request_rate") == pytest.approx(0.5, rel=1e-6)
    assert back.value("tokens_per_s") == pytest.approx(sol.value("tokens_per_s"), rel=1e-6)


@pytest.mark.parametrize("order", [[1, 2, 4, 8], [2, 1, 8, 4]])
def test_a_swept_variable_an_if_condition_reads_is_not_folded_at_the_first_point(throughput, order):
    # t_comm = if_(tp > 1, ...): each point takes its own branch, whatever the first point was
    given = {**BASE, "concurrency": 64}
    r = sweep(throughput, {"tp": order}, given, ["t_comm", "t_step"])
    for i, tp in enumerate(order):
        sol = solve_model(throughput, ("t_comm", "t_step"), {**given, "tp": tp})
        assert r["t_comm"][i] == pytest.approx(sol.value("t_comm"), rel=1e-12, abs=1e-15)
        assert r["t_step"][i] == pytest.approx(sol.value("t_step"), rel=1e-12)
    assert (r["t_comm"] > 0).tolist() == [tp > 1 for tp in order]
