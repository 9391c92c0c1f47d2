"""Real vLLM start-up logs (tests/data/vllm_kv_points.yaml, each with its source).

From each point's logged numbers the llm_memory pack must reproduce what vLLM printed,
within the rounding of the log: the per-GPU KV bytes per token, the KV pool from the logged
memory components, and the block (or token) count from the logged KV memory.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

import concur

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm_kv_points.yaml"
POINTS = YAML(typ="safe").load(DATA.read_text())
GIB_HALF_STEP = 0.005  # logs print GiB with two decimals

# Points whose logged count is known not to follow from the logged memory (the reason is in
# the data file's `check` text); they are expected to fail and would pass silently if fixed.
KNOWN_DEVIATIONS = {
    "vllm-21348-qwen3-235b-a22b-fp8-tp4-h100": "memory printed by one worker, blocks are the minimum over workers",
}


def _arch_given(point: dict) -> dict:
    arch = point["arch"]
    tp = point.get("tensor_parallel_size") or 1
    pp = point.get("pipeline_parallel_size") or 1
    per_token = arch["kv_bytes_per_token_per_rank"]
    if arch.get("kv_lora_rank"):
        given = {
            "attention": "mla",
            "layers": arch["layers"],
            "kv_lora_rank": arch["kv_lora_rank"],
            "qk_rope_head_dim": arch["qk_rope_head_dim"],
        }
        elems = math.ceil(arch["layers"] / pp) * (arch["kv_lora_rank"] + arch["qk_rope_head_dim"])
    else:
        given = {"layers": arch["layers"], "kv_heads": arch["kv_heads"], "head_dim": arch["head_dim"]}
        elems = 2 * math.ceil(arch["layers"] / pp) * max(1, arch["kv_heads"] // tp) * arch["head_dim"]
    given.update(
        {
            "tp": tp,
            "pp": pp,
            "kv_bytes": f"{per_token / elems} B/token",
            "block_size": f"{point.get('block_size') or point.get('block_size_implied') or 16} token",
        }
    )
    return given


def _usable(point: dict) -> bool:
    arch = point.get("arch") or {}
    flags = set(point.get("flags") or [])
    if "hybrid_sliding" in flags and not (
        arch.get("sliding_window") and "alternating" in str(arch.get("layer_pattern"))
    ):
        return False
    return bool(arch.get("kv_bytes_per_token_per_rank")) and not flags & {"hybrid_linear", "exotic"}


def _sliding_given(point: dict) -> dict:
    """Alternating sliding/full layers (gpt-oss): half the layers keep only the window."""
    arch = point["arch"]
    if not arch.get("sliding_window"):
        return {}
    return {
        "sliding_window": f"{arch['sliding_window']} token",
        "sliding_window_layers": arch["layers"] // 2,
        "prefill_chunk": f"{point.get('max_num_batched_tokens') or 2048} token",
    }


KV_POINTS = [p for p in POINTS if _usable(p)]
COUNT_POINTS = [
    p
    for p in KV_POINTS
    if p.get("reported_available_kv_cache_gib")
    and (p.get("reported_num_gpu_blocks") or p.get("reported_kv_cache_tokens"))
]
COMPONENT_POINTS = [
    p
    for p in POINTS
    if p.get("gpu_memory_gib_reported")
    and p.get("gpu_memory_utilization")
    and p.get("reported_weights_gib")
    and p.get("reported_available_kv_cache_gib")
    and p.get("outcome") == "ok"
]


def test_data_has_points():
    assert len(COUNT_POINTS) >= 3 and len(COMPONENT_POINTS) >= 3


@pytest.mark.parametrize("point", KV_POINTS, ids=lambda p: p["id"])
def test_kv_bytes_per_token(point):
    sol = concur.solve("kv_per_token", _arch_given(point), packs="llm_memory")
    assert sol.value("kv_per_token", "B/token") == pytest.approx(point["arch"]["kv_bytes_per_token_per_rank"])


def _marks(point: dict) -> list:
    reason = KNOWN_DEVIATIONS.get(point["id"])
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


@pytest.mark.parametrize("point", [pytest.param(p, id=p["id"], marks=_marks(p)) for p in COUNT_POINTS])
def test_block_count_within_log_rounding(point):
    gib = point["reported_available_kv_cache_gib"]
    counts = []
    for pool in (gib - GIB_HALF_STEP, gib + GIB_HALF_STEP):
        sol = concur.solve("kv_blocks,kv_tokens", {**_arch_given(point), "kv_pool": f"{pool} GiB"}, packs="llm_memory")
        counts.append((sol.value("kv_blocks"), sol.value("kv_tokens")))
    (lo_blocks, lo_tokens), (hi_blocks, hi_tokens) = counts
    if point.get("reported_num_gpu_blocks"):
        assert lo_blocks <= point["reported_num_gpu_blocks"] <= hi_blocks
    else:
        assert lo_tokens <= point["reported_kv_cache_tokens"] <= hi_tokens


CONCURRENCY_POINTS = [
    p
    for p in COUNT_POINTS
    + [q for q in KV_POINTS if q.get("reported_available_kv_cache_gib") and q.get("reported_kv_cache_tokens")]
    if p.get("reported_max_concurrency") and p.get("max_model_len")
]


@pytest.mark.parametrize(
    "point", [pytest.param(p, id=p["id"], marks=_marks(p)) for p in {id(p): p for p in CONCURRENCY_POINTS}.values()]
)
def test_max_concurrency_from_logged_tokens(point):
    """vLLM's "Maximum concurrency for N tokens per request: X" from its logged KV tokens."""
    tokens = point.get("reported_kv_cache_tokens") or point["reported_num_gpu_blocks"] * 16
    given = {**_arch_given(point), **_sliding_given(point), "context": f"{point['max_model_len']} token"}
    # kv_tokens is what vLLM logged: give the pool that holds exactly that many tokens
    per_token = point["arch"]["kv_bytes_per_token_per_rank"]
    given["kv_pool"] = f"{tokens * per_token} B"
    sol = concur.solve("max_concurrency", given, packs="llm_memory")
    assert sol.value("max_concurrency") == pytest.approx(point["reported_max_concurrency"], abs=0.006)


@pytest.mark.parametrize("point", COMPONENT_POINTS, ids=lambda p: p["id"])
def test_kv_pool_from_logged_components(point):
    # vLLM sizes the pool before it captures CUDA graphs: the logged cudagraph memory is not
    # subtracted. v0 logs give peak_torch_memory (weights + activations) instead of activations.
    activation = point.get("reported_peak_activation_gib")
    if activation is None:
        match = re.search(r"peak_torch_memory=([0-9.]+)GiB", point.get("other_reported") or "")
        activation = float(match.group(1)) - point["reported_weights_gib"] if match else 0.0
    overhead = activation + (point.get("reported_non_torch_gib") or 0.0)
    sol = concur.solve(
        "kv_pool",
        {
            "gpu_memory": f"{point['gpu_memory_gib_reported']} GiB",
            "mem_util": point["gpu_memory_utilization"],
            "weights_per_gpu": f"{point['reported_weights_gib']} GiB",
            "overhead": f"{overhead} GiB",
        },
        packs="llm_memory",
    )
    # each logged component is rounded to 0.01 GiB: allow half a step per term
    assert sol.value("kv_pool", "GiB") == pytest.approx(point["reported_available_kv_cache_gib"], abs=0.025)
