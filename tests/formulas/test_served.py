"""The fleet is sized on what a loaded replica serves: the served step (decodes plus the prompts'
share), never the decode-only step; no answer needs more than its GPUs' dense peak FLOP/s or HBM
bandwidth; the prefill constant comes from low-load prefill measurements only."""

from __future__ import annotations

import random

import pytest

from concur.analysis.engine_fits import fit_prefill
from concur.analysis.fleet_plan import plan_fleet
from concur.errors import ConcurError
from concur.lang.library import get_catalog
from concur.lang.model import build_model
from concur.solver.question import solve_model

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "qwen3-8b", "mixtral-8x7b"]
GPUS = ["h100-sxm-80gb", "a100-sxm-80gb", "h200-sxm-141gb", "mi300x", "l40s"]
ENGINES = ["vllm", "sglang", "trtllm", None]
DTYPES = [("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "fp8")]


def _questions(n: int, seed: int = 21) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w, k = rng.choice(DTYPES)
        q: dict[str, object] = {
            "model": rng.choice(MODELS),
            "gpu": rng.choice(GPUS),
            "tp": rng.choice([1, 2, 4, 8]),
            "weight_dtype": w,
            "kv_dtype": k,
            "arrival_rate": f"{rng.choice([2, 5, 10, 25, 50])} request/s",
            "input_tokens": f"{rng.choice([200, 1000, 3000])} token/request",
            "output_tokens": f"{rng.choice([100, 300, 800])} token/request",
        }
        engine = rng.choice(ENGINES)
        if engine is not None:
            q["engine"] = engine
        out.append(q)
    return out


def test_every_fleet_answer_serves_the_tokens_asked_at_the_itl_it_promises() -> None:
    """Forward solves over random fleet questions: replicas x served output tokens/s of one replica
    at the fleet's batch >= arrival_rate x output_tokens, itl is the served time per output token,
    and both utilizations stay within the hardware."""
    model = build_model(["llm_fleet"])
    names = (
        "replicas",
        "batch",
        "itl",
        "t_step",
        "t_step_served",
        "served_tokens_per_s",
        "compute_utilization",
        "bandwidth_utilization",
    )
    answered = 0
    for q in _questions(40):
        try:
            sol = solve_model(model, names, q)
        except ConcurError:
            continue  # does not fit, TP does not divide the heads, saturates: refused with a reason
        v = sol.values
        answered += 1
        served = v["replicas"] * v["served_tokens_per_s"]
        asked = sol.value("arrival_rate", "request/s") * sol.value("output_tokens", "token/request")
        assert served >= asked * (1 - 1e-6), (q, served, asked)
        assert v["itl"] == pytest.approx(v["t_step_served"], rel=1e-9), q
        assert v["t_step_served"] >= v["t_step"] * (1 - 1e-9), q
        assert 0 < v["compute_utilization"] <= 1 and 0 < v["bandwidth_utilization"] <= 1, q
    assert answered >= 15  # enough of the random questions have an answer to mean something


@pytest.mark.parametrize(
    "question",
    [
        {
            "model": "llama-3.1-70b",
            "arrival_rate": 50,
            "input_tokens": 1000,
            "output_tokens": 400,
            "ttft_slo": "2 s",
            "itl_slo": "50 ms",
        },
        {
            "model": "qwen3-32b",
            "arrival_rate": 25,
            "input_tokens": 3000,
            "output_tokens": 300,
            "ttft_slo": "1.5 s",
            "itl_slo": "40 ms",
        },
    ],
)
def test_no_feasible_plan_row_needs_more_than_its_gpus_dense_peak(question: dict[str, object]) -> None:
    result = plan_fleet(question, confirm=3)
    feasible = result.feasible
    assert feasible
    for c in feasible:
        assert c.compute_utilization is not None and 0 < c.compute_utilization <= 1, c.config
        assert c.bandwidth_utilization is not None and 0 < c.bandwidth_utilization <= 1, c.config
        assert c.itl is not None and c.itl <= float(str(question["itl_slo"]).split()[0]) * 1e-3 * (1 + 1e-6)
    for c in result.candidates:
        if c.rejection is not None:
            assert set(c.rejection) == {"kind", "variable", "value", "limit"}


def test_prefill_constant_comes_from_low_load_ttft_and_a_70b_prompt_takes_what_kernels_take() -> None:
    """The catalog's efficiency_prefill is the median of the concurrency-1 inversions (so it was
    regenerated from tests/data/prefill_points.yaml), and a 1,000-token Llama-3.1-70B TP4 bf16
    prefill on H100 with vLLM's constants is near the ~66 ms of kernel timings, not the 218 ms the
    loaded-TTFT fit gave."""
    fit = fit_prefill("tests/data/prefill_points.yaml")
    for engine, entry in get_catalog("engines").entries.items():
        assert entry.values["efficiency_prefill"][0] == pytest.approx(fit.value, abs=5e-3), engine
    sol = solve_model(
        build_model(["llm_throughput"]),
        ("prefill_time",),
        {
            "model": "llama-3.1-70b",
            "gpu": "h100-sxm-80gb",
            "tp": 4,
            "weight_dtype": "bf16",
            "kv_dtype": "bf16",
            "engine": "vllm",
            "input_tokens": 1000,
            "output_tokens": 400,
            "concurrency": 1,
        },
    )
    assert 45 <= sol.value("prefill_time", "ms") <= 90


def test_the_plan_path_sweeps_in_base_units() -> None:
    """sweep(..., base_units=True) takes and gives base units (s, flop/s ...): the same answers as the
    display-unit sweep, scaled by each variable's display factor, so fleet_plan passes no unit text."""
    import numpy as np

    from concur.sweep import sweep

    model = build_model(["llm_throughput"])
    given = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "input_tokens": 1024, "output_tokens": 256}
    shown = sweep(
        model, {"concurrency": [1.0, 16.0], "allreduce_latency": [8.0, 8.0]}, given, ["itl", "ttft"], grid=False
    )
    base = sweep(
        model,
        {"concurrency": [1.0, 16.0], "allreduce_latency": [8e-6, 8e-6]},
        given,
        ["itl", "ttft"],
        grid=False,
        base_units=True,
    )
    for name in ("itl", "ttft"):
        factor = model.variables[name].display.factor
        assert factor != 1  # ms on display, s in base units
        assert np.allclose(base[name], np.asarray(shown[name]) * factor, rtol=1e-12)
    assert np.allclose(base["allreduce_latency"], [8e-6, 8e-6])
