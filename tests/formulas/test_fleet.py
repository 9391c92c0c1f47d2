"""The fleet question end to end (llm_fleet): model + GPU + traffic + SLA -> replicas, GPUs, dollars,
asked the way a user asks it, in every direction, with the KV pool and the batch cap respected."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from concur.errors import ContradictionError, InfeasibleError
from concur.lang.model import build_model
from concur.solver.question import solve_model

CONFIG = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "tp": 4, "input_tokens": 1000, "output_tokens": 400}
RATE = {**CONFIG, "arrival_rate": 50}


def concur(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "concur", *args], capture_output=True, text=True, timeout=120)


def sets(given: dict) -> list[str]:
    return [x for k, v in given.items() for x in ("--set", f"{k}={v}")]


@pytest.fixture(scope="module")
def fleet():
    return build_model(["llm_fleet"])


@pytest.fixture(scope="module")
def answer() -> dict:
    """The issue's first command, as JSON."""
    res = concur("solve", "--find", "replicas,fleet_gpus,cost_per_month", *sets(RATE), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _value(doc: dict, name: str) -> float:
    return float(doc["results"][name]["value"])


def test_the_headline_question_is_one_command(answer) -> None:
    replicas = _value(answer, "replicas")
    assert replicas == int(replicas) >= 1
    assert _value(answer, "fleet_gpus") == 4 * replicas
    assert _value(answer, "cost_per_month") > 0  # the H100's list price, from the price catalog


def test_one_replica_fewer_carries_less_than_the_rate(fleet, answer) -> None:
    r = int(_value(answer, "replicas"))
    below = solve_model(fleet, ("arrival_rate",), {**CONFIG, "replicas": r - 1}).value("arrival_rate")
    at = solve_model(fleet, ("arrival_rate",), {**CONFIG, "replicas": r}).value("arrival_rate")
    assert below < 50 <= at


def test_the_default_question_derives_the_step_time_from_the_model() -> None:
    res = concur("solve", "--find", "replicas", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    given = set(doc["given"]) if isinstance(doc["given"], (dict, list)) else set()
    assert {"model", "gpu"} <= given
    assert not given & {"t_step", "step_time_base", "step_time_per_seq", "residence_time"}


def test_a_concurrency_past_the_kv_pool_is_refused() -> None:
    """A batch of 400 requests: the pool holds 322 of 1,400 tokens: exit 3, saying so."""
    res = concur("solve", "llm_throughput", "--find", "tokens_per_s", *sets(CONFIG), "--set", "concurrency=400")
    assert res.returncode == 3
    assert "the 322.1 request a replica's KV pool holds whole" in res.stderr
    held = solve_model(
        build_model(["llm_memory"]),
        ("users",),
        {**{k: v for k, v in CONFIG.items() if k not in ("input_tokens", "output_tokens")}, "context": "1400 token"},
    )
    assert held.value("users") == 322


def test_an_sla_raises_the_replica_count_and_says_which_binds(fleet) -> None:
    free = solve_model(fleet, ("replicas",), RATE)
    tight = solve_model(fleet, ("replicas", "itl"), {**RATE, "itl_slo": "30 ms"})
    assert tight.value("replicas") > free.value("replicas")
    assert tight.value("itl", "ms") <= 30
    below = solve_model(fleet, ("itl",), {**RATE, "replicas": tight.value("replicas") - 1})
    assert below.value("itl", "ms") > 30  # the smallest replica count meeting the target


def test_a_target_met_by_one_replica_is_answered_with_one_not_a_million(fleet) -> None:
    """A goal seek whose goals all hold at the lower bound answers that bound (regression: it once
    searched upward and answered 1,000,000 replicas). H100 SXM: its NVLink reaches all 8 GPUs (on
    H100 PCIe, TP8 crosses PCIe and needs 3 replicas)."""
    cheap = {
        **RATE,
        "arrival_rate": 10,
        "gpu": "h100-sxm-80gb",
        "tp": 8,
        "weight_dtype": "fp8",
        "kv_dtype": "fp8",
        "engine": "sglang",
        "ttft_slo": "2 s",
        "itl_slo": "50 ms",
    }
    sol = solve_model(fleet, ("replicas", "itl"), cheap)
    assert sol.value("replicas") == 1 and sol.value("itl", "ms") <= 50


def test_more_replicas_than_needed_are_a_question_not_a_contradiction(fleet) -> None:
    need = int(solve_model(fleet, ("replicas",), RATE).value("replicas"))
    itls = [
        solve_model(fleet, ("itl", "batch"), {**RATE, "replicas": r}).value("itl", "ms")
        for r in (need, need + 1, need + 5)
    ]
    assert itls[0] > itls[1] > itls[2]  # a smaller batch per replica steps quicker
    with pytest.raises(InfeasibleError, match="replicas=.* is too few"):
        solve_model(fleet, ("itl",), {**RATE, "replicas": need - 1})
    with pytest.raises(InfeasibleError) as info:
        solve_model(fleet, ("itl",), {**RATE, "replicas": need - 1})
    assert not isinstance(info.value, ContradictionError) and info.value.exit_code == 3


def test_rate_and_replicas_with_an_sla_take_no_detour_through_the_model_constants(fleet) -> None:
    """Givens that over-determine the loop (replicas, rate and SLAs) leave the rounding and the SLA
    equations as checks; the dense model's active_fraction keeps its natural value. H100 SXM at
    TP8 (NVLink to all 8): one replica carries the rate at a 17 ms step."""
    given = {
        **RATE,
        "arrival_rate": 10,
        "gpu": "h100-sxm-80gb",
        "tp": 8,
        "weight_dtype": "fp8",
        "kv_dtype": "fp8",
        "engine": "sglang",
        "ttft_slo": "2 s",
        "itl_slo": "50 ms",
    }
    for r in (1, 2, 3):
        sol = solve_model(fleet, ("batch", "itl", "active_fraction"), {**given, "replicas": r})
        assert sol.value("active_fraction") == pytest.approx(1.0)
        assert sol.value("itl", "ms") <= 50
    with pytest.raises(InfeasibleError, match="itl_slo"):
        solve_model(fleet, ("batch",), {**given, "replicas": 1, "itl_slo": "10 ms"})


def test_a_budget_gives_the_largest_rate_through_the_replicas_it_buys(fleet) -> None:
    """monthly_budget -> replicas (the most it pays for) -> arrival_rate (the most they carry):
    two searches, each cheap, instead of a rate search whose every trial solves the replica loop."""
    cfg = {k: v for k, v in RATE.items() if k != "arrival_rate"}
    sol = solve_model(fleet, ("arrival_rate", "replicas", "cost_per_month"), {**cfg, "monthly_budget": 45000})
    replicas = sol.value("replicas")
    assert replicas == 2 and sol.value("cost_per_month", "usd/month") <= 45000
    edge = solve_model(fleet, ("arrival_rate",), {**cfg, "replicas": 2}).value("arrival_rate")
    assert sol.value("arrival_rate") == pytest.approx(edge, rel=1e-9)
    assert solve_model(fleet, ("replicas",), {**RATE, "arrival_rate": edge * 1.001}).value("replicas") == 3
    with pytest.raises(InfeasibleError, match=r"cost_per_month is 20089.6 usd/month at replicas = 1 replica"):
        solve_model(fleet, ("arrival_rate",), {**cfg, "monthly_budget": 5000})


def test_the_trace_of_a_searched_answer_holds_every_step_of_the_loop_inside(fleet) -> None:
    """The replicas search and the loop torn inside it probe hundreds of values without recording
    them; the trial at the chosen values records every step, once, with the answer's values."""
    sol = solve_model(fleet, ("replicas",), RATE)
    names = [s.variable for s in sol.trace]
    assert len(names) == len(set(names))
    after = names[names.index("replicas") :]
    assert after[1] == "concurrency"  # the torn loop, inside the integer search
    assert {"t_step_served", "ttft", "residence_time", "in_flight", "batch", "kv_batch_limit"} <= set(after)
    for step in sol.trace:
        assert step.value == sol.values[step.variable], step.variable
