"""Solver behaviour: T1 numbers, backwards questions, over/under-determined input, saturation."""

from __future__ import annotations

import pytest

import concur
from concur.errors import ContradictionError, InfeasibleError, UnderdeterminedError, UsageError

T1 = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "tp": 4,
    "kv_dtype": "bf16",
    "weight_dtype": "bf16",
    "context": "8192 token",
    "overhead": "4 GiB",
    "mem_util": 0.9,
}


@pytest.mark.parametrize("extra, users", [({}, 55), ({"kv_dtype": "fp8"}, 110), ({"tp": 8}, 162), ({"tp": 16}, 188)])
def test_t1_users(extra, users):
    assert concur.solve("users", {**T1, **extra}, packs="llm_memory").value("users") == users


def test_t1_intermediates_match_design():
    sol = concur.solve("kv_per_token,kv_tokens", T1, packs="llm_memory")
    assert sol.value("kv_per_token") == 81920
    assert sol.value("kv_tokens") == 451008


def test_smallest_tp_for_100_users_divides_heads():
    given = {k: v for k, v in T1.items() if k != "tp"} | {"users": 100}
    sol = concur.solve("tp", given, packs="llm_memory")
    assert sol.value("tp") == 8
    assert any(s.method == "search" for s in sol.trace)


def test_memory_for_users_is_the_smallest_that_fits():
    base = {k: v for k, v in T1.items() if k != "gpu"}
    mem = concur.solve("gpu_memory", {**base, "users": 100}, packs="llm_memory").value("gpu_memory")
    assert mem == pytest.approx(110.39, rel=1e-3)
    enough = concur.solve("users", {**base, "gpu_memory": f"{mem} GiB"}, packs="llm_memory")
    assert enough.value("users") >= 100
    short = concur.solve("users", {**base, "gpu_memory": f"{mem * 0.999} GiB"}, packs="llm_memory")
    assert short.value("users") < 100


def test_longest_context_for_users():
    given = {k: v for k, v in T1.items() if k != "context"} | {"users": 100}
    ctx = concur.solve("context", given, packs="llm_memory").value("context")
    assert ctx == pytest.approx(4510.08, rel=1e-9)


def test_does_not_fit_is_an_answer():
    with pytest.raises(InfeasibleError, match="does not fit"):
        concur.solve("users", {**T1, "model": "llama-3.1-405b", "gpu": "l40s"}, packs="llm_memory")


def test_underdetermined_names_what_is_missing():
    with pytest.raises(UnderdeterminedError) as info:
        concur.solve("users", {"model": "llama-3.1-70b", "context": 8192}, packs="llm_memory")
    assert "gpu_memory" in info.value.missing


def test_contradiction_names_equation_and_values():
    given = {
        "kv_pool": "34 GiB",
        "model": "llama-3.1-70b",
        "gpu": "h100-sxm-80gb",
        "tp": 4,
        "overhead": "4 GiB",
        "mem_util": 0.9,
    }
    with pytest.raises(ContradictionError, match=r"kv_pool=34 GiB contradicts .* the model gives 34\.4"):
        concur.solve("kv_blocks", given, packs="llm_memory")


def test_given_and_asked_is_refused():
    with pytest.raises(UsageError, match="both given and asked"):
        concur.solve("users", {**T1, "users": 3}, packs="llm_memory")


def test_a_preset_value_asked_for_is_answered_and_said_to_be_the_presets():
    """Asking for what a preset fills (the GPU's memory) with no target to solve it from answers
    the preset's value, says whose it is, and still computes what else was asked from it."""
    sol = concur.solve(("gpu_memory", "users"), T1, packs="llm_memory")
    assert sol.values["gpu_memory"] == sol.givens.values["gpu_memory"] and sol.value("gpu_memory", "GiB") > 79
    assert sol.value("users") == 55
    assert any(n.startswith("gpu_memory = ") and "is what gpu=h100-sxm-80gb gives" in n for n in sol.notes)


def test_a_preset_value_asked_for_with_a_target_is_solved_backwards():
    """With a target that fixes it, the asked preset variable is the unknown: no note, another value."""
    given = {**T1, "kv_pool": "40 GiB"}
    sol = concur.solve("gpu_memory", given, packs="llm_memory")
    assert sol.value("gpu_memory", "GiB") > 80
    assert not any("is what gpu=" in n for n in sol.notes)


def test_an_underdetermined_question_still_names_what_is_missing_when_a_preset_is_asked():
    with pytest.raises(UnderdeterminedError, match="cannot determine"):
        concur.solve(("gpu_memory", "kv_blocks"), {"gpu": "h100-sxm-80gb"}, packs="llm_memory")


def test_unknown_preset_id_suggests():
    with pytest.raises(UsageError, match="h100-sxm-80gb"):
        concur.solve("users", {**T1, "gpu": "h100-sxm-80"}, packs="llm_memory")


def test_trace_orders_equations_and_cites_lines():
    sol = concur.solve("users", T1, packs="llm_memory")
    order = [s.variable for s in sol.trace if s.method == "forward"]
    assert order.index("kv_pool") < order.index("kv_blocks") < order.index("users")
    step = next(s for s in sol.trace if s.variable == "users")
    assert sol.where(step).startswith("formulas/llm_memory.yaml:")


def test_json_shape():
    data = concur.solve("users", T1, packs="llm_memory").to_json()
    assert data["results"] == {"users": {"value": 55, "unit": "user"}}
    assert data["given"]["tp"]["value"] == 4
    assert data["trace"]


def test_mla_replicated_latent():
    sol = concur.solve("kv_per_token", {"model": "deepseek-v3", "kv_dtype": "bf16", "tp": 16}, packs="llm_memory")
    assert sol.value("kv_per_token") == 61 * 576 * 2


FLEET = {
    "arrival_rate": 50,
    "ttft": "500 ms",
    "output_tokens": 400,
    "step_time_base": "20 ms",
    "step_time_per_seq": "0.05 ms*replica/request",
    "per_replica_concurrency": 64,
    "utilization": 0.8,
}


def test_replicas_inside_the_batch_fixed_point_is_the_smallest_that_suffices():
    sol = concur.solve("replicas,in_flight", FLEET, packs="littles_law")
    n = sol.value("replicas")
    assert n == 10
    # the fixed point at n replicas fits under n x 64 x 0.8; at n - 1 it would not
    assert sol.value("in_flight") <= n * 64 * 0.8
    fewer = concur.solve(
        "in_flight",
        {k: v for k, v in FLEET.items() if k not in ("per_replica_concurrency", "utilization")} | {"replicas": n - 1},
        packs="littles_law",
    )
    assert fewer.value("in_flight") > (n - 1) * 64 * 0.8
    step = next(s for s in sol.trace if s.variable == "replicas")
    assert step.method == "integer tear" and "loop torn" in step.note


def test_saturated_fleet_is_an_answer_not_a_crash():
    given = {k: v for k, v in FLEET.items() if k not in ("per_replica_concurrency", "utilization")}
    with pytest.raises(InfeasibleError, match="never drains"):
        concur.solve(
            "in_flight",
            given | {"arrival_rate": 70, "replicas": 10, "step_time_per_seq": "0.5 ms*replica/request"},
            packs="littles_law",
        )


def test_solution_items_are_quantities_with_units():
    sol = concur.solve("kv_pool,users", T1, packs="llm_memory")
    pool = sol["kv_pool"]
    assert str(pool.units) == "gibibyte"
    assert pool.to("GB").magnitude == pytest.approx(sol.value("kv_pool", "GB"))
    assert sol.value("kv_pool", "B") == pytest.approx(pool.to("B").magnitude)


def test_exactly_at_saturation_is_the_saturation_answer():
    """Regression: at arrival_rate == saturation_rate the loop has no solution at all (was exit 1)."""
    given = {
        "arrival_rate": 50,
        "replicas": 10,
        "output_tokens": 400,
        "ttft": 500,
        "step_time_base": 20,
        "step_time_per_seq": 0.5,
    }  # bare numbers are in the display units (ms)
    with pytest.raises(InfeasibleError, match="never drains"):
        concur.solve("in_flight", given, packs="littles_law")


PLAN = {"ttft": "500 ms", "output_tokens": 400, "t_step": "30 ms", "per_replica_concurrency": 64}


def test_replicas_to_largest_rate():
    """A given ceil output is a requirement: the largest rate ten replicas carry at 80 %."""
    sol = concur.solve("arrival_rate", PLAN | {"replicas": 10, "utilization": 0.8}, packs="littles_law")
    assert sol.value("arrival_rate") == pytest.approx(10 * 64 * 0.8 / 12.5, rel=1e-9)
    assert "largest" in sol.notes[0]


def test_rate_and_replicas_to_utilization():
    sol = concur.solve("utilization", PLAN | {"replicas": 10, "arrival_rate": 40}, packs="littles_law")
    assert sol.value("utilization") == pytest.approx(40 * 12.5 / 640, rel=1e-9)


RATE = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "input_tokens": 1024, "output_tokens": 2048}


def test_request_rate_closes_the_littles_law_loop():
    sol = concur.solve("concurrency,latency", RATE | {"request_rate": 0.5}, packs="llm_throughput")
    assert sol.value("concurrency") == pytest.approx(0.5 * sol.value("latency", "s"), rel=1e-6)


def test_request_rate_above_what_a_replica_serves_is_an_answer():
    with pytest.raises(InfeasibleError, match="cannot keep up"):
        concur.solve("concurrency", RATE | {"request_rate": 100}, packs="llm_throughput")


def test_an_equation_whose_every_variable_is_given_is_checked():
    """Regression: a fully given equation used to be skipped, so contradictions passed silently."""
    given = {
        "gpu_memory": "80 GiB",
        "mem_util": 0.9,
        "weights_per_gpu": "30 GiB",
        "overhead": "4 GiB",
        "kv_pool": "20 GiB",
        "layers": 80,
        "kv_heads": 8,
        "head_dim": 128,
    }
    with pytest.raises(ContradictionError, match="kv_pool=20 GiB contradicts"):
        concur.solve("kv_blocks", given, packs="llm_memory")


def test_a_default_yields_to_a_direct_inversion_from_givens():
    """active_params given: active_fraction follows from it instead of taking its default of 1."""
    sol = concur.solve("active_fraction", {"params": 8, "active_params": "2e9 parameter"}, packs="llm_throughput")
    assert sol.value("active_fraction") == pytest.approx(0.25)


def test_an_exact_integer_target_between_two_counts_names_both():
    import concur
    from concur.errors import InfeasibleError

    with pytest.raises(
        InfeasibleError,
        match="no whole replicas gives fleet_gpus exactly 42 gpu: 10 replica gives 40 gpu, 11 replica gives 44 gpu",
    ):
        concur.solve(find="replicas", given={"fleet_gpus": 42, "gpus_per_replica": 4}, packs="cost")
    assert (
        concur.solve(find="replicas", given={"fleet_gpus": 4_000_000, "gpus_per_replica": 4}, packs="cost").value(
            "replicas"
        )
        == 1_000_000
    )


def test_the_trace_is_in_one_order_whatever_the_hash_seed():
    """Independent steps come in one order in every process (string hashing varies per process and
    once chose the order of the plan's blocks), so a trace, and what is built from it, can be diffed."""
    import os
    import subprocess
    import sys

    code = (
        "from concur.lang.model import build_model\n"
        "from concur.solver.question import solve_model\n"
        "m = build_model(['llm_fleet'])\n"
        "sol = solve_model(m, ('replicas',), {'model': 'llama-3.1-70b', 'gpu': 'h100-sxm-80gb', 'tp': 4,\n"
        "    'arrival_rate': 50, 'input_tokens': 1000, 'output_tokens': 400})\n"
        "print(' '.join(s.variable for s in sol.trace))\n"
    )
    orders = set()
    for seed in ("1", "2", "3"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        orders.add(out.stdout)
    assert len(orders) == 1
