"""DeepSeek-R1 as InferenceX serves it: llm_throughput and llm_disagg against every run of the benchmark
that concur can pose (tests/data/inferencex_dsr1.yaml: 143 single-node and 30 disaggregated runs on H100,
H200, B200, B300, MI300X, MI325X and MI355X). Nothing is fitted on these runs.

What must hold:

* a single-node run's served output per GPU and its TPOT are within x1.5 of the model at the run's
  configuration, concurrency and mean lengths (0.9 x nominal), except the runs named in
  :data:`KNOWN_MISSES`, which are expected to fail (strict: a fixed miss must leave the list);
* a disaggregated run's TPOT is within x1.5 of its decode workers' ITL at their share of the run's
  concurrency;
* the model's TTFT is never above a run's median TTFT by more than :data:`TTFT_SLACK`: the pack's TTFT
  is the GPUs' part of a first token and leaves out the request path, so it is a lower bound, up to
  the error of the kernel rates it charges (8k-token prompts on H200 under SGLang, whose MLA prefill
  attention is charged at its measured rate, come out 1.01x to 1.05x below the median). The median, not the mean: every client
  of a closed-loop run starts at once, and the first wave queues behind itself (a run's mean TTFT is a
  median 2.1x and up to 16x its median TTFT, its p99 a median 12x). Where llm_disagg's pools cannot
  carry a disaggregated run's rate, the run must have queued too (:data:`QUEUED_MS`).

How far below the median TTFT the model stays is printed by ``python tests/formulas/test_inferencex_dsr1.py``
and quoted in docs/t11-serving-modes.md: it is not within x1.5.
"""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from concur.errors import InfeasibleError
from concur.lang.model import Model, build_model
from concur.solver.question import solve_model

ROOT = Path(__file__).resolve().parents[2]
DATA = YAML(typ="safe").load((ROOT / "tests" / "data" / "inferencex_dsr1.yaml").read_text())
SINGLE = DATA["single_node"]
DISAGG = DATA["disaggregated"]
MEAN_LENGTH = 0.9  # lengths drawn uniformly from [0.8, 1] x nominal
WITHIN = 1.5
TTFT_SLACK = 1.1  # how far above a run's median TTFT the model may be: the kernel fits' error, not the request path
QUEUED_MS = 2000.0  # every single-node run's median TTFT of an 8k prompt at concurrency 4 is below this

# Runs the model misses by more than x1.5, each with what is known of why.
_PREFILL_HEAVY = (
    "8k-token prompts at load on SGLang with B300 or at TP4: the model's MoE prefill is cheaper than "
    "the run's (docs/t11-serving-modes.md, 'Checked against')"
)
_OLD_RELEASE = "an SGLang release of 2025 (the engines catalog's constants are fitted on the 2026 releases)"
KNOWN_MISSES: dict[str, str] = {
    "ix-b300-sglang-fp4-tp4-ep4-8k1k-c16": _PREFILL_HEAVY,
    "ix-b300-sglang-fp4-tp4-ep4-8k1k-c32": _PREFILL_HEAVY,
    "ix-b300-sglang-fp4-tp4-ep4-8k1k-c128": _PREFILL_HEAVY,
    "ix-b300-sglang-fp8-tp8-8k1k-c4": _PREFILL_HEAVY,
    "ix-b300-sglang-fp8-tp4-8k1k-c8": _PREFILL_HEAVY,
    "ix-mi355x-sglang-mxfp4-tp4-1k8k-c4": _OLD_RELEASE,
    "ix-mi355x-sglang-mxfp4-tp4-1k8k-c8": _OLD_RELEASE,
    "ix-mi355x-sglang-mxfp4-tp4-8k1k-c4": _OLD_RELEASE,
    "ix-mi355x-sglang-mxfp4-tp4-8k1k-c8": _OLD_RELEASE,
    "ix-b200-sglang-fp4-tp8-1k1k-c64": _OLD_RELEASE,
    "ix-b200-sglang-fp4-tp4-8k1k-c4": _OLD_RELEASE,
    "ix-b200-sglang-fp4-tp8-8k1k-c8": _OLD_RELEASE,
}
KNOWN_POOL_MISSES: dict[str, str] = {
    "ix-b200-dynamo-trt-fp8-2ptp8-ep8-dpa-5dtp8-ep8-dpa-1k1k-c5152": (
        "the model's decode worker holds fewer requests than the run kept in flight (about 1,030 a worker): "
        "its KV pool at mem_util 0.9 and fp8 KV is the smaller"
    ),
}


@cache
def _model(pack: str) -> Model:
    return build_model([pack])


def _question(run: dict[str, Any]) -> dict[str, Any]:
    q: dict[str, Any] = {k: run[k] for k in ("gpu", "engine", "weight_dtype", "kv_dtype", "tp", "ep", "dp_attention")}
    q.update(
        model="deepseek-v3",
        input_tokens=f"{MEAN_LENGTH * run['isl']} token/request",
        output_tokens=f"{MEAN_LENGTH * run['osl']} token/request",
    )
    return q


def output_per_gpu(run: dict[str, Any]) -> float:
    """The run's output tokens a second per GPU (from input and output where only their sum is published)."""
    measured = run["measured"]
    if "output_tok_s_per_gpu" in measured:
        return float(measured["output_tok_s_per_gpu"])
    return float(measured["total_tok_s_per_gpu"]) * run["osl"] / (run["isl"] + run["osl"])


def single_node(run: dict[str, Any]) -> dict[str, float]:
    """llm_throughput at the run's configuration and concurrency: TTFT and ITL in ms, output per GPU."""
    q = {**_question(run), "concurrency": f"{run['concurrency']} request", "kv_fit": "ignore"}
    v = solve_model(_model("llm_throughput"), ("ttft", "itl", "served_tokens_per_s"), q)
    return {
        "ttft": v.value("ttft", "ms"),
        "itl": v.value("itl", "ms"),
        "output_per_gpu": v.value("served_tokens_per_s", "token/s") / run["tp"],
    }


def decode_worker_itl(run: dict[str, Any]) -> float:
    """A disaggregated run's decode worker (llm_throughput, prefill_share 0) at its share of the run's
    concurrency: the ITL in ms. A closed-loop run caps what is in flight; posing the rate instead would let
    any error in the step grow the batch and the step again."""
    q = {
        **_question(run),
        "prefill_share": 0,
        "concurrency": f"{run['concurrency'] / run['decode_workers']} request",
        "kv_fit": "ignore",
    }
    return solve_model(_model("llm_throughput"), ("itl",), q).value("itl", "ms")


def arrival_rate(run: dict[str, Any]) -> float:
    """A disaggregated run's requests a second: its output over the mean output length."""
    return output_per_gpu(run) * run["n_gpus"] / (MEAN_LENGTH * run["osl"])


def disaggregated_ttft(run: dict[str, Any]) -> float:
    """llm_disagg's TTFT in ms at the run's pools and :func:`arrival_rate`;
    the prefill pool takes the decode workers' layout (llm_disagg has one layout for both)."""
    q = {
        **_question(run),
        "kv_link": "ib-ndr-400g",
        "arrival_rate": f"{arrival_rate(run)} request/s",
        "utilization": 1,
        **{k: run[k] for k in ("prefill_workers", "prefill_tp", "decode_workers")},
    }
    return solve_model(_model("llm_disagg"), ("ttft",), q).value("ttft", "ms")


def _ratio(a: float, b: float) -> float:
    return max(a, b) / min(a, b)


def _marks(run: dict[str, Any], misses: dict[str, str] = KNOWN_MISSES) -> Any:
    reason = misses.get(run["id"])
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(run, id=run["id"], marks=marks)


def test_the_runs_span_engines_gpus_and_modes() -> None:
    assert {r["engine"] for r in SINGLE} == {"sglang", "trtllm"}
    assert {"h200-sxm-141gb", "b200", "mi300x", "mi355x"} <= {r["gpu"] for r in SINGLE}
    assert len(SINGLE) >= 140 and len(DISAGG) >= 30
    assert len({r["id"] for r in SINGLE + DISAGG}) == len(SINGLE) + len(DISAGG)
    assert set(KNOWN_MISSES) <= {r["id"] for r in SINGLE} and set(KNOWN_POOL_MISSES) <= {r["id"] for r in DISAGG}
    assert len(KNOWN_MISSES) <= len(SINGLE) // 10


@pytest.mark.parametrize("run", [_marks(r) for r in SINGLE])
def test_single_node_output_and_tpot_within_x1_5(run: dict[str, Any]) -> None:
    m = single_node(run)
    assert _ratio(m["output_per_gpu"], output_per_gpu(run)) <= WITHIN, (m["output_per_gpu"], output_per_gpu(run))
    assert _ratio(m["itl"], run["measured"]["tpot_ms_mean"]) <= WITHIN, (m["itl"], run["measured"]["tpot_ms_mean"])


@pytest.mark.parametrize("run", SINGLE, ids=lambda r: r["id"])
def test_single_node_ttft_never_above_the_median(run: dict[str, Any]) -> None:
    assert single_node(run)["ttft"] <= TTFT_SLACK * run["measured"]["ttft_ms_median"]


@pytest.mark.parametrize("run", DISAGG, ids=lambda r: r["id"])
def test_disaggregated_decode_itl_within_x1_5(run: dict[str, Any]) -> None:
    itl = decode_worker_itl(run)
    assert _ratio(itl, run["measured"]["tpot_ms_mean"]) <= WITHIN, (itl, run["measured"]["tpot_ms_mean"])


@pytest.mark.parametrize("run", [_marks(r, KNOWN_POOL_MISSES) for r in DISAGG])
def test_disaggregated_ttft_below_the_median_or_both_queue(run: dict[str, Any]) -> None:
    """Where the model's pools carry the run's rate with prompts waiting less than :data:`QUEUED_MS`, its
    TTFT is at most the median; where they cannot carry it, or only with prompts queued longer than that
    (a prefill pool at 0.99 of its capacity), the run queued too: a median TTFT over :data:`QUEUED_MS`."""
    try:
        ttft = disaggregated_ttft(run)
    except InfeasibleError as exc:
        assert run["measured"]["ttft_ms_median"] > QUEUED_MS, exc
        return
    if ttft > QUEUED_MS:
        assert run["measured"]["ttft_ms_median"] > QUEUED_MS, ttft
        return
    assert ttft <= run["measured"]["ttft_ms_median"]


def report() -> str:
    """Median TTFT over the model's, by GPU and engine, and the share of runs within x1.5 (markdown)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for run in SINGLE:
        m = single_node(run)
        groups.setdefault((run["gpu"], run["engine"]), []).append(run["measured"]["ttft_ms_median"] / m["ttft"])
    lines = [
        "| GPU | engine | runs | median TTFT / model: min | median | max |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for (gpu, engine), ratios in sorted(groups.items()):
        lines.append(
            f"| {gpu} | {engine} | {len(ratios)} | {min(ratios):.2f} | {statistics.median(ratios):.2f} | {max(ratios):.2f} |"
        )
    every = sorted(r for ratios in groups.values() for r in ratios)
    close = sum(_ratio(r, 1.0) <= WITHIN for r in every)
    lines.append(
        f"\nmedian TTFT / model over all {len(every)} runs: {every[0]:.2f} to {every[-1]:.2f}, median "
        f"{statistics.median(every):.2f}; within x{WITHIN}: {close}"
    )
    within = sum(run["id"] not in KNOWN_MISSES for run in SINGLE)
    lines.append(f"single-node runs with output and TPOT within x{WITHIN}: {within} of {len(SINGLE)}")
    return "\n".join(lines)


def _loaded_with_one_layout(run: dict[str, Any]) -> bool:
    """A run of at least 256 clients whose prompts waited (a median TTFT over 1.5 s) and whose prefill
    workers have the decode workers' layout."""
    same = all(run[f"prefill_{k}"] == run[k] for k in ("ep", "dp_attention")) and run["prefill_tp"] == run["tp"]
    return same and run["concurrency"] >= 256 and run["measured"]["ttft_ms_median"] > 1500


def prefill_capacity(run: dict[str, Any]) -> float:
    """Prompt tokens a second one prefill worker of the run's layout computes in full passes."""
    q = {**_question(run), "kv_link": "ib-ndr-400g", "prefill_tp": run["prefill_tp"], "prefill_workers": 1}
    v = solve_model(
        _model("llm_disagg"), ("prefill_pass_prompts", "prefill_pass_time"), {**q, "arrival_rate": "1 request/s"}
    )
    return v.value("prefill_pass_prompts", "") * MEAN_LENGTH * run["isl"] / v.value("prefill_pass_time", "s")


KNOWN_CAPACITY_MISSES: dict[str, str] = {
    "ix-b200-dynamo-trt-fp8-1ptp8-ep8-dpa-1dtp8-ep8-dpa-8k1k-c256": (
        "0.78x what the run carried: TensorRT-LLM's MoE kernels on B200 are not among the measured kernels "
        "(tests/data/moe_kernels.yaml); the B200 FP8 grouped-GEMM rate the pack charges is SGLang's and vLLM's "
        "(0.381 of a dense prefill's rate at the shape, against 0.577 on Hopper), and this worker's 8k-token "
        "prompts come out 22% slower than the run prefilled them"
    ),
}


@pytest.mark.parametrize("run", [_marks(r, KNOWN_CAPACITY_MISSES) for r in DISAGG if _loaded_with_one_layout(r)])
def test_a_prefill_worker_carries_what_a_loaded_run_carried(run: dict[str, Any]) -> None:
    """What a loaded run's prefill workers carried (its prompts over its workers) is a floor under
    their capacity, so the pack's is at least that: the layout's all-to-all, not a tensor-parallel
    all-reduce of every token, crosses the nodes of a wide-EP worker (the all-reduce put a TP16 worker
    over two H100 nodes at 0.29x and 0.26x what two such runs carried). At most 2x above it (the MoE
    prefill the pack prices too cheap, docs/t11-serving-modes.md)."""
    floor = arrival_rate(run) * MEAN_LENGTH * run["isl"] / run["prefill_workers"]
    assert floor <= prefill_capacity(run) <= 2 * floor


class _BenchmarkLengths:
    """InferenceX's random dataset for a closed loop: prompt and output lengths uniform in [0.8, 1] x
    nominal (arrival times are the clients' own)."""

    def __init__(self, isl: int, osl: int) -> None:
        import numpy as np

        self.isl, self.osl, self.rng = isl, osl, np.random.default_rng(1)

    def next(self) -> tuple[float, int, int]:
        draw = self.rng.integers
        return 0.0, int(draw(int(0.8 * self.isl), self.isl + 1)), int(draw(int(0.8 * self.osl), self.osl + 1))


@pytest.mark.parametrize("run_id", ["ix-h200-sglang-fp8-tp8-1k1k-c64", "ix-h200-sglang-fp8-tp8-8k1k-c32"])
def test_a_closed_loop_started_at_once_inflates_the_mean_ttft(run_id: str) -> None:
    """Why the tests compare with the median TTFT: the engine simulator run as the benchmark runs (all
    clients at once, 10 requests a client, none discarded) puts the mean TTFT 3.0x and 2.5x its median
    (the runs measured 2.35x and 2.80x; the simulator's median leaves out the per-request cost the
    model's TTFT misses, which lowers a measured ratio); with the first wave of prompts discarded, mean
    and median agree. The steady state the pack models is the median's."""
    from concur.analysis.enginesim import simulate_engine
    from concur.analysis.step_model import solve_engine

    run = next(r for r in SINGLE if r["id"] == run_id)
    clients = run["concurrency"]
    step, limits, _ = solve_engine({**_question(run), "concurrency": f"{clients} request", "kv_fit": "ignore"})

    def ratio(warmup: int) -> float:
        lengths = _BenchmarkLengths(run["isl"], run["osl"])
        result = simulate_engine(
            step, limits, lengths, requests=10 * clients - warmup, warmup=warmup, concurrency=clients
        )
        return result.ttft.mean / result.ttft.p50

    measured = run["measured"]["ttft_ms_mean"] / run["measured"]["ttft_ms_median"]
    at_once = ratio(0)
    assert at_once > 2.0 and measured / WITHIN < at_once < WITHIN * measured
    assert ratio(clients) < 1.1


if __name__ == "__main__":
    print(report())
