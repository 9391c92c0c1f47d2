"""The engine simulator against prefill-dominated offline runs (tests/data/offline_runs.yaml).

Every request of such a run is sent at once; prompts are long and outputs short, so the measured
duration is mostly the engine prefilling at its full token budget, with the KV pool deciding how
many requests run together. The simulator replays the run (all requests at t = 0) with the pack's
step physics and the engine's constants; the simulated duration is compared with the measured one.

What must hold:

* the physics never charges more work than the engine measurably did: no run simulates slower than
  :data:`SLOWEST` x its measured duration (a tenth for the measurement's noise). The 32K runs, whose
  KV pool holds a handful of requests, hold it only because the simulator schedules KV as the
  engines do (TensorRT-LLM reserves whole contexts; vLLM's prefix cache spares a preempted
  request's surviving prefix): recomputing everything, they simulated up to 1.9x slower;
* how optimistic the model is at a full token budget stays where it was measured and documented:
  no run simulates faster than measured / :data:`FASTEST` (the engines' prefill efficiency is fitted
  on TensorRT-LLM runs at concurrency 1; at full budget vLLM, SGLang and TensorRT-LLM reach less);
* the format physics: 4-bit weights on an H100 (no FP4 units) run their matmuls at the BF16 peak,
  so gpt-oss's prefill is not credited with FP8 speed (its 2K and 4K runs were 2.1-3.9x optimistic when it was);
* docs/t2-throughput.md's table of these runs is what this module computes, line for line.

``python tests/analysis/test_offline_runs.py`` prints the table.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from concur.analysis.arrivals import Trace
from concur.analysis.calibration import median
from concur.analysis.enginesim import simulate_engine
from concur.analysis.step_model import solve_engine

ROOT = Path(__file__).resolve().parents[2]
RUNS = YAML(typ="safe").load((ROOT / "tests" / "data" / "offline_runs.yaml").read_text())["runs"]
SLOWEST = 1.1  # simulated / measured duration, at most
FASTEST = 2.7  # measured / simulated duration, at most
#: runs whose single request needs more KV than concur's pool estimate gives the GPU (the engine ran
#: it: concur's fixed memory overhead is conservative there); the simulator cannot start them
TOO_LONG_FOR_THE_POOL = {"gps-h100-qwen3-32b-vllm-bf16-tp1-random32k-offline"}


@dataclass(frozen=True)
class Replay:
    run_id: str
    measured_s: float
    simulated_s: float
    measured_ttft_s: float
    simulated_ttft_s: float

    @property
    def ratio(self) -> float:
        """measured / simulated duration: above 1 the model is optimistic."""
        return self.measured_s / self.simulated_s


@cache
def replay(run_id: str) -> Replay:
    run = next(r for r in RUNS if r["id"] == run_id)
    n = run["requests"]
    isl = round(run["input_tokens_total"] / n)
    osl = max(1, round(run["output_tokens_total"] / n))
    given: dict[str, Any] = {
        k: run[k] for k in ("model", "gpu", "tp", "weight_dtype", "kv_dtype", "engine") if k in run
    }
    given.update(input_tokens=f"{isl} token/request", output_tokens=f"{osl} token/request")
    override = {"token_budget": run["token_budget"]} if "token_budget" in run else {}
    step, limits, _ = solve_engine(given, **override)
    trace = Trace(path=run_id, times=[0.0] * n, inputs=[isl] * n, outputs=[osl] * n)
    res = simulate_engine(step, limits, trace, requests=n)
    return Replay(run_id, run["duration_s"], res.simulated_time, run["ttft_ms_mean"] / 1e3, res.ttft.mean)


REPLAYED = [r["id"] for r in RUNS if r["id"] not in TOO_LONG_FOR_THE_POOL]


def test_the_runs_are_copied_whole() -> None:
    """Every run names its source and locator, and its lengths are the benchmark's totals."""
    for run in RUNS:
        assert run["source"].startswith("https://github.com/gpustack/gpustack/blob/"), run["id"]
        assert "random" in run["locator"] and run["requests"] in (100, 500), run["id"]
        assert run["input_tokens_total"] / run["requests"] > 1900, run["id"]
        assert 0 < run["ttft_ms_mean"] / 1e3 < run["duration_s"], run["id"]


# Runs the simulator charges more than SLOWEST x measured, each with what is known of why (strict: a fixed
# miss must leave the list).
CHARGED_MORE: dict[str, str] = {
    "gps-h100-qwen3-235b-a22b-vllm-bf16-tp8-random4k-offline": (
        "1.12x: the routed experts are charged what vLLM's MoE kernel measures for this shape on H100 "
        "(tests/data/moe_kernels.yaml: 0.41 of a dense prefill's rate against 0.42 measured), so the excess "
        "lies elsewhere in the 4K prefill at TP8 and is not traced"
    ),
}


def _charged(run_id: str) -> Any:
    reason = CHARGED_MORE.get(run_id)
    return pytest.param(run_id, marks=[pytest.mark.xfail(reason=reason, strict=True)] if reason else [])


@pytest.mark.parametrize("run_id", [_charged(r) for r in REPLAYED])
def test_the_simulator_never_charges_more_than_the_engine_did(run_id: str) -> None:
    r = replay(run_id)
    assert r.simulated_s <= SLOWEST * r.measured_s, (run_id, r.simulated_s, r.measured_s)


@pytest.mark.parametrize("run_id", REPLAYED)
def test_the_optimism_at_full_budget_stays_as_documented(run_id: str) -> None:
    r = replay(run_id)
    assert r.ratio <= FASTEST, (run_id, r.simulated_s, r.measured_s)


MOE_WITHIN = 1.8  # measured / simulated duration of every MoE run, at most


def test_moe_runs_replay_within_what_their_kernels_explain() -> None:
    """An MoE prompt's routed experts run at what the engines' MoE kernels measure for the experts'
    shape (concur.analysis.moe_kernels): every MoE run replays within x1.8 of its measured duration
    (0.89x to 1.71x). With one median kernel rate per engine and layout, whatever the shape, DeepSeek-R1's
    2K run on 8 x H200 replayed at 2.10x; with the routed experts at a dense prefill's rate, 2.6x."""
    from concur.lang.library import get_catalog

    models = get_catalog("models").entries
    moe = [r["id"] for r in RUNS if r["id"] in REPLAYED and models[r["model"]].values.get("experts", (0,))[0]]
    assert len(moe) >= 15
    for run_id in moe:
        assert 1 / MOE_WITHIN < replay(run_id).ratio < MOE_WITHIN, (run_id, replay(run_id).ratio)


def test_four_bit_weights_on_a_gpu_without_fp4_units_compute_at_the_bf16_peak() -> None:
    """gpt-oss (MXFP4 experts) on one H100: the matmuls run dequantised to BF16, so its 2K runs are no
    more than 2.5x optimistic; charged at the FP8 peak they were 2.3x and 3.9x."""
    for run_id in (
        "gps-h100-gpt-oss-20b-vllm-mxfp4-tp1-random2k-offline",
        "gps-h100-gpt-oss-120b-vllm-mxfp4-tp1-random2k-offline",
    ):
        assert replay(run_id).ratio < 2.5, run_id
    from concur.lang.model import build_model
    from concur.solver.question import solve_model

    model = build_model(["llm_throughput"])
    base = {"model": "gpt-oss-120b", "tp": 1, "weight_dtype": "mxfp4", "kv_dtype": "bf16", "engine": "vllm"}
    hopper = solve_model(model, ("peak_flops",), {**base, "gpu": "h100-sxm-80gb"}).values
    blackwell = solve_model(model, ("peak_flops",), {**base, "gpu": "b200"}).values
    assert hopper["peak_flops"] == hopper["peak_flops_bf16"]
    assert blackwell["peak_flops"] == blackwell["peak_flops_fp8"] > blackwell["peak_flops_bf16"]


def table() -> list[str]:
    """The markdown table of docs/t2-throughput.md: every run, measured against simulated."""
    lines = [
        "| run | measured | simulated | measured / simulated | mean TTFT measured | simulated |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in RUNS:
        if run["id"] in TOO_LONG_FOR_THE_POOL:
            lines.append(f"| {run['id']} | {run['duration_s']:.1f} s | not run: one request exceeds the pool | | | |")
            continue
        r = replay(run["id"])
        lines.append(
            f"| {r.run_id} | {r.measured_s:.1f} s | {r.simulated_s:.1f} s | {r.ratio:.2f} | "
            f"{r.measured_ttft_s:.1f} s | {r.simulated_ttft_s:.1f} s |"
        )
    ratios = sorted(replay(i).ratio for i in REPLAYED)
    lines.append("")
    lines.append(
        f"measured / simulated over {len(ratios)} runs: {ratios[0]:.2f} to {ratios[-1]:.2f}, median {median(ratios):.2f}"
    )
    return lines


def test_the_table_in_t2_is_what_concur_computes() -> None:
    text = (ROOT / "docs" / "t2-throughput.md").read_text()
    block = text.split("<!-- offline-table:begin -->\n")[1].split("\n<!-- offline-table:end -->")[0]
    assert block.splitlines() == table()


if __name__ == "__main__":
    sys.stdout.write("\n".join(table()) + "\n")
