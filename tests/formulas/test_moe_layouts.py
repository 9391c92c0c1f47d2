"""MoE layouts in the served-step model (llm_throughput, llm_memory) and in ``concur plan``.

What must hold:

* a step reads the routed experts its tokens touch: under uniform routing n tokens touch
  E x (1 - (1 - k/E)^n) of the E experts of a layer, so a decode batch reads a little of them and a
  1,000-token prompt nearly all, and the prompt's chunk is never quicker than that read;
* expert parallelism charges the all-to-all (dispatch and combine of every token's hidden vector to its
  k experts), more when EP spans two nodes (the scale-out link), scaled by the stated expert imbalance;
* data-parallel attention replicates the non-expert weights on every rank and holds each rank's own KV;
* bad layouts (EP not dividing the experts, EP on a dense model, DP attention not dividing TP) get one
  error line naming the variables, exit 2;
* dense models are untouched: every expert term vanishes exactly;
* against measurements (tests/data/moe_points.yaml): served output throughput within x1.5; the model's
  TTFT at a light load and its prefill capacity are never beyond what the GPUs were measured to do
  (TTFT never above the measured one, prefill capacity never below the measured rate);
* ``concur plan`` for an MoE model offers EP and EP + DP-attention layouts and TP16 over two nodes, and
  reports ep, dp_attention and nodes per row; a dense model's grid has none of them.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from concur.analysis.disagg_plan import disagg_model, link_values, prefill_options
from concur.errors import InfeasibleError
from concur.lang.library import get_catalog
from concur.lang.model import Model, build_model
from concur.solver.givens import resolve_givens
from concur.solver.question import solve_model

ROOT = Path(__file__).resolve().parents[2]
DATA = YAML(typ="safe").load((ROOT / "tests" / "data" / "moe_points.yaml").read_text())
POINTS = {
    p["id"]: p
    for p in YAML(typ="safe").load((ROOT / "tests" / "data" / "throughput_points.yaml").read_text())["points"]
}
DSV3_H200 = {
    "model": "deepseek-v3",
    "gpu": "h200-sxm-141gb",
    "tp": 8,
    "weight_dtype": "fp8",
    "kv_dtype": "fp8",
    "engine": "sglang",
    "input_tokens": "1000 token/request",
    "output_tokens": "400 token/request",
    "concurrency": "1 request",
}


@cache
def _model() -> Model:
    return build_model(["llm_throughput"])


BITS = 8  # the solver's base unit of memory is the bit


def _solve(question: dict[str, Any], *names: str) -> dict[str, float]:
    """The values of ``names`` in base units (s, bit, parameter) for ``question``."""
    return dict(solve_model(_model(), names, question).values)


def _ratio(a: float, b: float) -> float:
    return max(a / b, b / a)


def test_a_long_prompt_reads_every_expert_a_decode_step_few() -> None:
    """DeepSeek-V3 on 8 x H200: one decode reads its active share; a 1,000-token prompt's chunk reads all
    but (1 - 8/256)^1000 of the routed experts, and takes at least that read at full bandwidth."""
    v = _solve(DSV3_H200, "weights_per_gpu", "weights_read", "chunk_weights_read", "t_step_chunk", "efficiency")
    hbm = get_catalog("gpus").entries["h200-sxm-141gb"].values["hbm_bandwidth"][0] * 1e12 * BITS  # bit/s
    assert v["weights_read"] < 0.2 * v["weights_per_gpu"]
    assert v["chunk_weights_read"] > 0.999 * v["weights_per_gpu"]
    assert v["t_step_chunk"] >= v["chunk_weights_read"] / hbm / v["efficiency"]


@pytest.mark.parametrize("batch", [1, 4, 32, 256])
def test_experts_touched_follow_uniform_routing(batch: int) -> None:
    """The routed bytes a decode step reads are E x (1 - (1 - k/E)^n) experts' worth of each layer, n the
    batch (Qwen3-235B-A22B: 128 experts, 8 per token, every layer MoE; no shared part is routed; in BF16,
    as its FP8 checkpoint's 128-wide scale blocks cannot be sliced over eight)."""
    q = {**DSV3_H200, "model": "qwen3-235b-a22b", "weight_dtype": "bf16", "concurrency": f"{batch} request"}
    v = _solve(q, "weights_read", "weights_per_gpu", "routed_weights_per_gpu")
    entry = get_catalog("models").entries["qwen3-235b-a22b"].values
    experts, k = entry["experts"][0], entry["experts_per_token"][0]
    touched = experts * (1 - (1 - k / experts) ** batch)
    shared = v["weights_per_gpu"] - v["routed_weights_per_gpu"]
    assert (v["weights_read"] - shared) / v["routed_weights_per_gpu"] == pytest.approx(touched / experts, rel=1e-9)


def test_expert_parallel_all_to_all_is_charged_and_wide_ep_pays_the_scale_out_link() -> None:
    """Per token and MoE layer EP sends k hidden vectors out and back: 2 k h a / tp bytes per GPU at the
    slower of its intra-node and inter-node shares. Across two 8-GPU H200 nodes the scale-out NIC (50 GB/s)
    sets it; a stated imbalance scales it."""
    one = _solve({**DSV3_H200, "ep": 8}, "layout_comm_per_token", "alltoall_time_per_byte", "t_comm")
    two = _solve({**DSV3_H200, "tp": 16, "ep": 16}, "layout_comm_per_token", "alltoall_time_per_byte", "nodes")
    skew = _solve({**DSV3_H200, "ep": 8, "expert_imbalance": 1.5}, "layout_comm_per_token")
    assert one["alltoall_time_per_byte"] * BITS == pytest.approx(7 / 8 / 450e9, rel=1e-12)  # s per byte
    assert two["alltoall_time_per_byte"] * BITS == pytest.approx(8 / 16 / 50e9, rel=1e-12)
    assert two["nodes"] == 2
    assert two["layout_comm_per_token"] > 2 * one["layout_comm_per_token"]
    assert skew["layout_comm_per_token"] > one["layout_comm_per_token"]
    assert one["t_comm"] > 0


def test_deepep_dispatches_fp8_tokens_and_combines_bf16() -> None:
    """With moe_dispatch deepep and FP8 experts a token goes out in FP8 (1 B a value) and comes back in
    BF16 (2 B): the all-to-all's bytes are 3/4 of the engine path's 2 x 2 B. BF16 experts are dispatched
    in BF16."""
    ep = {**DSV3_H200, "ep": 8, "dp_attention": 8}  # attention on one GPU a rank: no all-reduce, the all-to-all alone
    engine = _solve(ep, "layout_comm_per_token", "dispatch_bytes")
    deepep = _solve({**ep, "moe_dispatch": "deepep"}, "layout_comm_per_token", "dispatch_bytes")
    qwen_bf16 = {**DSV3_H200, "model": "qwen3-235b-a22b", "weight_dtype": "bf16", "ep": 8, "moe_dispatch": "deepep"}
    bf16 = _solve(qwen_bf16, "dispatch_bytes")
    assert (
        engine["dispatch_bytes"] / BITS == 2
        and deepep["dispatch_bytes"] / BITS == 1
        and bf16["dispatch_bytes"] / BITS == 2
    )
    assert deepep["layout_comm_per_token"] == pytest.approx(0.75 * engine["layout_comm_per_token"], rel=1e-9)
    assert deepep["layout_comm_per_token"] < engine["layout_comm_per_token"]


def test_dp_attention_replicates_the_shared_weights_and_splits_the_kv() -> None:
    """DP attention over 8 ranks: 7 more copies of the non-expert weights per GPU, and every rank holds
    only its own requests' MLA latent (replicated on all 8 GPUs at plain TP8), so the KV pool holds
    several times the requests even though the replicated weights leave less room."""
    plain = _solve(DSV3_H200, "weights_per_gpu", "kv_batch_limit", "kv_tokens")
    dp = _solve({**DSV3_H200, "ep": 8, "dp_attention": 8}, "weights_per_gpu", "kv_batch_limit", "kv_tokens")
    entry = get_catalog("models").entries["deepseek-v3"].values
    shared = entry["params"][0] - entry["expert_params"][0]
    extra = (dp["weights_per_gpu"] - plain["weights_per_gpu"]) / BITS  # bytes; fp8: 1 B per parameter
    assert extra == pytest.approx(shared * 7 / 8, rel=1e-9)
    assert dp["kv_batch_limit"] == pytest.approx(8 * dp["kv_tokens"] / 1400, rel=1e-9)
    assert dp["kv_batch_limit"] > 3 * plain["kv_batch_limit"]


@pytest.mark.parametrize(
    ("model", "tp", "layout", "words"),
    [
        (
            "mixtral-8x7b",
            6,
            ["--set", "ep=6"],
            "ep 6 cannot give every GPU the same number of whole routed experts: the model has 8",
        ),
        ("llama-3.1-8b", 2, ["--set", "ep=2"], "the model has 0 (models catalog)"),
        ("mixtral-8x7b", 4, ["--set", "ep=2"], "ep 2 differs from tp 4"),
        (
            "mixtral-8x7b",
            8,
            ["--set", "ep=8", "--set", "dp_attention=3"],
            "dp_attention 3 does not split the tp 8 GPUs",
        ),
    ],
)
def test_a_bad_layout_gets_one_line_naming_it_and_exit_2(model: str, tp: int, layout: list[str], words: str) -> None:
    base = ["--set", f"model={model}", "--set", f"tp={tp}", "--set", "gpu=h200-sxm-141gb", "--set", "weight_dtype=fp8"]
    traffic = ["--set", "input_tokens=1000", "--set", "output_tokens=400", "--set", "concurrency=8"]
    res = subprocess.run(
        [sys.executable, "-m", "concur", "solve", "llm_throughput", *base, *traffic, *layout, "--find", "itl"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], res.stderr


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dense_models_have_no_expert_terms(model: str, engine: str) -> None:
    """A dense model reads all its weights in every kind of step, and naming the default layout
    (ep 1, dp_attention 1) changes nothing at all."""
    q = {**DSV3_H200, "model": model, "tp": 4, "engine": engine, "weight_dtype": "bf16", "concurrency": "16 request"}
    names = ("weights_per_gpu", "weights_read", "prefill_weights_read", "chunk_weights_read", "pass_weights_read")
    v = _solve(q, *names, "full_weights_read", "itl", "ttft", "t_comm")
    assert {v[n] for n in (*names, "full_weights_read")} == {v["weights_per_gpu"]}
    w = _solve({**q, "ep": 1, "dp_attention": 1}, "itl", "ttft", "t_comm")
    assert all(w[n] == v[n] for n in ("itl", "ttft", "t_comm"))


def test_the_prefill_pool_charges_the_stated_expert_imbalance() -> None:
    """Under expert parallelism the busiest prefill GPU runs expert_imbalance times its share of the
    routed experts' tokens, as the decode step does: the prompt's peak time grows by exactly that share."""
    given = {
        "model": "deepseek-v3",
        "gpu": "h200-sxm-141gb",
        "engine": "sglang",
        "tp": 8,
        "ep": 8,
        "prefill_tp": 8,
        "weight_dtype": "fp8",
        "kv_link": "ib-ndr-400g",
        "arrival_rate": "5 request/s",
        "input_tokens": "8000 token/request",
        "output_tokens": "400 token/request",
    }
    model = disagg_model()
    names = ("prefill_peak_time", "routed_active_params", "prefill_peak_flops")
    even = solve_model(model, names, given)
    skewed = solve_model(model, names, {**given, "expert_imbalance": 1.5})
    extra = (
        2
        * 0.5
        * even.value("routed_active_params", "parameter")
        * 8000
        / even.value("prefill_peak_flops", "flop/s")
        / 8
    )
    assert skewed.value("prefill_peak_time", "s") - even.value("prefill_peak_time", "s") == pytest.approx(
        extra, rel=1e-9
    )


def test_a_prefill_pool_of_another_tp_under_an_ep_layout_gets_one_line_and_exit_2() -> None:
    """llm_disagg has one layout for both pools: its prefill workers run the layout's collectives, so a
    prefill_tp other than tp under expert parallelism is refused before solving."""
    sets = {
        "model": "qwen3-235b-a22b",
        "gpu": "h200-sxm-141gb",
        "engine": "sglang",
        "tp": 8,
        "ep": 8,
        "prefill_tp": 4,
        "weight_dtype": "fp8",
        "kv_link": "ib-ndr-400g",
        "arrival_rate": 20,
        "input_tokens": 1000,
        "output_tokens": 400,
    }
    args = [x for k, v in sets.items() for x in ("--set", f"{k}={v}")]
    res = subprocess.run(
        [sys.executable, "-m", "concur", "solve", "llm_disagg", *args, "--find", "prefill_workers"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and "(dp_attention=1, ep=8, prefill_tp=4, tp=8)" in lines[0], res.stderr
    assert "give prefill_tp = tp" in lines[0]


def _point_question(point: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    q: dict[str, Any] = {
        "model": point["model"],
        "gpu": point["gpu"],
        "tp": point["tp"],
        "weight_dtype": point["weight_dtype"],
        "kv_dtype": point["kv_dtype"],
        "engine": point["engine"],
        "input_tokens": f"{row.get('input_tokens', point['isl'])} token/request",
        "output_tokens": f"{row.get('output_tokens', point['osl'])} token/request",
        "kv_fit": "ignore",
    }
    q.update({k: row[k] for k in ("ep", "dp_attention") if k in row})
    return q


def _batch(point: dict[str, Any], row: dict[str, Any], q: dict[str, Any]) -> float:
    if row.get("batch") != "engine_cap":
        return float(point["concurrency"])
    cap = get_catalog("engine_limits").entries[point["engine"]].values["max_num_seqs"][0]
    kv = _solve({**q, "concurrency": "1 request"}, "kv_batch_limit")["kv_batch_limit"]
    return min(cap, kv)


@pytest.mark.parametrize("row", DATA["served"], ids=lambda r: r["point"])
def test_served_throughput_within_x1_5_of_the_measurement(row: dict[str, Any]) -> None:
    point = POINTS[row["point"]]
    q = _point_question(point, row)
    q["concurrency"] = f"{_batch(point, row, q)} request"
    v = _solve(q, "served_tokens_per_s", "compute_utilization", "bandwidth_utilization")
    measured = point["measured"]
    per_gpu = measured.get("output_tok_s_per_gpu")
    total = per_gpu * point["n_gpus"] if per_gpu is not None else measured["output_tok_s_aggregate"]
    model = v["served_tokens_per_s"] * point["n_gpus"] / point["tp"]
    assert _ratio(model, total) <= 1.5, (row["point"], model, total)
    assert v["compute_utilization"] <= 1 and v["bandwidth_utilization"] <= 1


@pytest.mark.parametrize("row", DATA["ttft"], ids=lambda r: r["point"])
def test_ttft_never_above_the_measured_one(row: dict[str, Any]) -> None:
    """The model charges a prompt the experts it touches and its layout's collectives, nothing a real
    engine could skip: its TTFT stays at or below the measured mean (engines add tokenisation, HTTP and
    scheduling on top), and within the x6 the issue's 4-24x error is cut to (ratios in the message)."""
    point = POINTS[row["point"]]
    q = {**_point_question(point, row), "concurrency": f"{point['concurrency']} request"}
    if q["weight_dtype"] not in get_catalog("dtypes").entries:
        q["weight_dtype"] = "fp8"
    v = _solve(q, "ttft")
    measured = point["measured"]["ttft_ms_mean"] / 1e3
    assert v["ttft"] <= measured, (row["point"], v["ttft"], measured)
    assert measured / v["ttft"] < 6, (row["point"], v["ttft"], measured)


@pytest.mark.parametrize("row", DATA["prefill_offline"], ids=lambda r: r["id"])
def test_prefill_capacity_never_below_the_measured_rate(row: dict[str, Any]) -> None:
    """A replica prefilling a backlog runs full-budget steps; the prompt tokens a second it can do is a
    physical upper bound on what an offline run measured (which also decoded its outputs)."""
    assert row["input_tok_s"] == pytest.approx(row["input_tokens_total"] / row["duration_s"], rel=1e-3)
    q = {
        **{k: row[k] for k in ("model", "gpu", "tp", "ep", "dp_attention", "weight_dtype", "kv_dtype", "engine")},
        "input_tokens": f"{row['input_tokens_total'] / row['requests']} token/request",
        "output_tokens": f"{row['output_tokens']} token/request",
        "concurrency": "1 request",
    }
    v = _solve(q, "prefill_free_budget", "t_step_full")
    capacity = v["prefill_free_budget"] / v["t_step_full"]
    assert capacity >= row["input_tok_s"], (row["id"], capacity, row["input_tok_s"])


QUESTION = {
    "arrival_rate": 20,
    "input_tokens": 1000,
    "output_tokens": 400,
    "ttft_slo": "2 s",
    "itl_slo": "50 ms",
}


def _plan(model: str, *extra: str) -> dict[str, Any]:
    sets = [x for k, v in {**QUESTION, "model": model}.items() for x in ("--set", f"{k}={v}")]
    args = ["--gpus", "h200-sxm-141gb", "--engines", "sglang", "--weight-dtypes", "fp8", "--kv-dtypes", "fp8"]
    res = subprocess.run(
        [sys.executable, "-m", "concur", "plan", *sets, *args, *extra, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_block_scaled_fp8_experts_are_sliced_only_on_block_edges() -> None:
    """Qwen3-235B-A22B-FP8 scales each 128 x 128 block of a weight; TP8 would leave 1,536 / 8 = 192 of
    each expert on a GPU, which vLLM refuses to load. A solve says so and names the remedy; the plan
    rejects the tensor-parallel TP8 and TP16 rows and keeps TP8 with expert parallelism (whole experts)
    and TP4 (384 = 3 blocks); a disaggregated row asked for TP8 prefill workers with TP4 tensor-parallel
    decode gets no prefill pool, for that reason. BF16 weights, and DeepSeek-V3's 2,048-wide experts at
    TP8 (256), slice freely."""
    base = {**DSV3_H200, "model": "qwen3-235b-a22b", "concurrency": "8 request"}
    with pytest.raises(InfeasibleError, match="tp 8 leaves 192 of each routed expert") as err:
        _solve(base, "itl")
    assert "128-wide blocks" in str(err.value) and "expert parallelism" in str(err.value)
    for fine in ({"tp": 4}, {"ep": 8}, {"weight_dtype": "bf16"}, {"model": "deepseek-v3"}):
        assert _solve({**base, **fine}, "itl")["itl"] > 0
    plan = _plan("qwen3-235b-a22b", "--modes", "agg,disagg", "--set", "prefill_tp=8")
    rows = plan["candidates"]
    sliced = [r for r in rows if r["ep"] == 1 and r["tp"] in (8, 16) and r["mode"] == "agg"]
    assert sliced and all(not r["feasible"] and "128-wide blocks" in r["reason"] for r in sliced)
    assert any(r["feasible"] and r["tp"] == 8 and r["ep"] == 8 for r in rows)
    tp4 = [r for r in rows if r["mode"] == "disagg" and r["tp"] == 4 and r["ep"] == 1]
    assert tp4 and all(not r["feasible"] and "scale blocks' edges" in r["reason"] for r in tp4)


def test_plan_offers_moe_layouts_and_reports_them() -> None:
    """Qwen3-235B-A22B on H200: tp, ep and ep+dp layouts per TP, TP16 over two nodes; every row says its
    ep, dp_attention and nodes; the feasible ones stay within the GPUs' peak FLOP/s and bandwidth."""
    plan = _plan("qwen3-235b-a22b")
    rows = plan["candidates"]
    assert any("balanced routing (expert_imbalance 1" in n for n in plan["notes"])  # an assumption, stated
    layouts = {(r["tp"], r["ep"], r["dp_attention"]) for r in rows}
    assert {(8, 1, 1), (8, 8, 1), (8, 8, 8), (16, 16, 16)} <= layouts
    feasible = [r for r in rows if r["feasible"]]
    assert any(r["ep"] > 1 for r in feasible) and any(r["dp_attention"] > 1 for r in feasible)
    assert all(r["nodes"] == math.ceil(r["tp"] / 8) for r in feasible)
    assert all(r["compute_utilization"] <= 1 and r["bandwidth_utilization"] <= 1 for r in feasible)


@pytest.mark.parametrize(
    ("ep", "dp_attention", "weight_dtype", "tps"),
    [(8, 1, "fp8", [8]), (8, 8, "fp8", [8]), (1, 1, "bf16", [4, 8]), (1, 1, "fp8", [2, 4, 8])],
)
def test_plan_prefill_pools_run_their_fleets_layout(
    ep: int, dp_attention: int, weight_dtype: str, tps: list[int]
) -> None:
    """concur plan's prefill options for a TP8 configuration of Qwen3-235B: under EP or DP attention only
    the decode TP (llm_disagg's one layout, whose collectives are both pools'); tensor-parallel experts
    pair any prefill TP that holds the weights (BF16: not TP2; whether FP8 experts may be sliced so is
    the next test's)."""
    given = {
        "model": "qwen3-235b-a22b",
        "gpu": "h200-sxm-141gb",
        "engine": "sglang",
        "tp": 8,
        "ep": ep,
        "dp_attention": dp_attention,
        "weight_dtype": weight_dtype,
        "kv_dtype": "fp8",
        "input_tokens": "1000 token/request",
        "output_tokens": "400 token/request",
    }
    values = resolve_givens(disagg_model(), given).values
    link, _note = link_values({"kv_link": "ib-ndr-400g"})
    options = prefill_options([("row", values)], [1, 2, 4, 8], link, given)
    assert [o.tp for o in options["row"]] == tps


def test_plan_of_a_dense_model_has_no_moe_layouts() -> None:
    plan = _plan("llama-3.1-70b", "--tp", "4,8")
    assert {(r["ep"], r["dp_attention"]) for r in plan["candidates"]} == {(1, 1)}
    assert not any("expert_imbalance" in n for n in plan["notes"])


def test_balanced_routing_is_stated_where_expert_parallelism_reads_it() -> None:
    """A solve under EP notes the expert_imbalance it assumed; at ep 1 it reads none and says nothing,
    and a plan given the ratio does not restate it."""
    base = ["solve", "llm_throughput", "--find", "itl", "--set", "model=deepseek-v3", "--set", "gpu=h200-sxm-141gb"]
    base += ["--set", "tp=8", "--set", "weight_dtype=fp8", "--set", "kv_dtype=fp8", "--set", "concurrency=32"]
    base += ["--set", "input_tokens=1000", "--set", "output_tokens=400"]
    notes = {}
    for ep in (1, 8):
        res = subprocess.run(
            [sys.executable, "-m", "concur", *base, "--set", f"ep={ep}"], capture_output=True, text=True
        )
        assert res.returncode == 0, res.stderr
        notes[ep] = "assumed expert_imbalance = 1" in res.stdout + res.stderr
    assert notes == {1: False, 8: True}
    given = _plan("qwen3-235b-a22b", "--tp", "8", "--layouts", "ep", "--set", "expert_imbalance=1.2")
    assert any(r["ep"] == 8 and r["feasible"] for r in given["candidates"])
    assert not any("expert_imbalance" in n for n in given["notes"])


def test_plan_refuses_an_unknown_layout() -> None:
    sets = [x for k, v in {**QUESTION, "model": "qwen3-235b-a22b"}.items() for x in ("--set", f"{k}={v}")]
    res = subprocess.run(
        [sys.executable, "-m", "concur", "plan", *sets, "--layouts", "ep,pp"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "unknown layout 'pp'" in lines[0], res.stderr
