"""Hand-built workbook plans for the Excel tests (T1: KV cache -> users, docs/t1-kv-cache.md).

Closed forms are written here in base units (bytes, tokens) exactly as the
solver would hand them over; memories are *shown* in GiB and params in
billions, so the writer's unit scaling is exercised.
"""

from __future__ import annotations

import sympy as sp

from concur.excel.plan import (
    Derived,
    Input,
    PresetChoice,
    Scenario,
    SheetVar,
    Sweep,
    WorkbookPlan,
)

GIB = 2**30
S = sp.Symbol

# -- variables -----------------------------------------------------------------
V = {
    "params": SheetVar("params", "billion params", 1e9, "model parameters", bounds=(0, None)),
    "weight_bytes": SheetVar("weight_bytes", "B/param", 1, "bytes per weight (bf16 = 2, fp8 = 1)", bounds=(0.5, 4)),
    "kv_bytes": SheetVar("kv_bytes", "B", 1, "bytes per KV-cache element", bounds=(0.5, 4)),
    "layers": SheetVar("layers", "", 1, "transformer layers", integer=True, bounds=(1, 1000)),
    "kv_heads": SheetVar("kv_heads", "", 1, "key/value heads", integer=True, bounds=(1, 1024)),
    "head_dim": SheetVar("head_dim", "", 1, "dimension of one head", integer=True, bounds=(1, 4096)),
    "gpu_memory": SheetVar("gpu_memory", "GiB", GIB, "memory the driver reports", bounds=(1, 4096)),
    "mem_util": SheetVar("mem_util", "", 1, "fraction of GPU memory vLLM may use", bounds=(0.05, 1)),
    "overhead": SheetVar("overhead", "GiB", GIB, "activations + runtime per GPU", bounds=(0, None)),
    "tp": SheetVar("tp", "gpu", 1, "tensor-parallel degree", integer=True, bounds=(1, 64)),
    "pp": SheetVar("pp", "gpu", 1, "pipeline-parallel degree", integer=True, bounds=(1, 64)),
    "block_size": SheetVar("block_size", "token", 1, "tokens per paged KV block", integer=True, bounds=(1, 1024)),
    "context": SheetVar("context", "token", 1, "tokens reserved per user", integer=True, bounds=(1, None)),
    "weights_per_gpu": SheetVar("weights_per_gpu", "GiB", GIB, "weights held by one GPU"),
    "kv_pool": SheetVar("kv_pool", "GiB", GIB, "memory left for the KV cache"),
    "kv_heads_per_gpu": SheetVar(
        "kv_heads_per_gpu", "", 1, "KV heads per GPU (replicated past tp = kv_heads)", integer=True
    ),
    "kv_per_token": SheetVar("kv_per_token", "B/token", 1, "KV bytes per token per GPU"),
    "kv_blocks": SheetVar("kv_blocks", "block", 1, "paged blocks that fit", integer=True),
    "kv_tokens": SheetVar("kv_tokens", "token", 1, "tokens the KV pool holds", integer=True),
    "users": SheetVar("users", "user", 1, "users served at full context", integer=True),
}

EXPR = {
    "weights_per_gpu": S("params") * S("weight_bytes") / (S("tp") * S("pp")),
    "kv_pool": S("gpu_memory") * S("mem_util") - S("weights_per_gpu") - S("overhead"),
    "kv_heads_per_gpu": sp.Max(1, sp.floor(S("kv_heads") / S("tp"))),
    "kv_per_token": 2 * (S("layers") / S("pp")) * S("kv_heads_per_gpu") * S("head_dim") * S("kv_bytes"),
    "kv_blocks": sp.floor(S("kv_pool") / (S("kv_per_token") * S("block_size"))),
    "kv_tokens": S("kv_blocks") * S("block_size"),
    "users": sp.floor(S("kv_tokens") / S("context")),
}
DERIVED_ORDER = list(EXPR)

MODELS = {  # display units: params in billions
    "llama-3.1-70b": {"params": 70.55, "layers": 80, "kv_heads": 8, "head_dim": 128},
    "llama-3.1-8b": {"params": 8.03, "layers": 32, "kv_heads": 8, "head_dim": 128},
    "qwen3-32b": {"params": 32.8, "layers": 64, "kv_heads": 8, "head_dim": 128},
}
GPUS = {
    "h100-sxm-80gb": {"gpu_memory": 79.18},
    "h200-sxm-141gb": {"gpu_memory": 139.81},
    "a100-sxm-80gb": {"gpu_memory": 79.15},
}

BASE_INPUTS = {
    "weight_bytes": 2,
    "kv_bytes": 2,
    "mem_util": 0.90,
    "overhead": 4,
    "tp": 4,
    "pp": 1,
    "block_size": 16,
    "context": 8192,
}


def preset_table(catalog: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    names = next(iter(catalog.values())).keys()
    return {n: {ident: row[n] for ident, row in catalog.items()} for n in names}


def inputs_display(model: str = "llama-3.1-70b", gpu: str = "h100-sxm-80gb", **over: float) -> dict[str, float]:
    """Every input's display value for a model/GPU choice plus overrides."""
    vals: dict[str, float] = {**MODELS[model], **GPUS[gpu], **BASE_INPUTS}
    vals.update(over)
    return vals


def python_eval(inputs: dict[str, float]) -> dict[str, float]:
    """Evaluate the closed forms in Python with the sheet's snap rule; display units out."""
    from concur.excel.printer import py_eval

    env = {n: v * V[n].scale for n, v in inputs.items()}
    out = {}
    for name in DERIVED_ORDER:
        env[name] = py_eval(EXPR[name], env)
        out[name] = env[name] / V[name].scale
    return out


def t1_plan(description_override: str | None = None) -> WorkbookPlan:
    vals = inputs_display()
    model_vars = set(next(iter(MODELS.values())))
    gpu_vars = set(next(iter(GPUS.values())))
    inputs = []
    for name, value in vals.items():
        preset = "model" if name in model_vars else "gpu" if name in gpu_vars else None
        var = V[name]
        if name == "overhead" and description_override is not None:
            var = SheetVar(var.name, var.unit, var.scale, description_override, bounds=var.bounds)
        inputs.append(Input(var, value, preset=preset, source="catalog" if preset else ""))
    expected = python_eval(vals)
    derived = [
        Derived(V[n], EXPR[n], f"{n} = ...", f"formulas/llm_memory.yaml:{10 + i}", expected[n])
        for i, n in enumerate(DERIVED_ORDER)
    ]
    presets = [
        PresetChoice(
            "model",
            "models",
            "llama-3.1-70b",
            tuple(MODELS),
            preset_table(MODELS),
            {"params": {k: "config.json / model card" for k in MODELS}},
        ),
        PresetChoice(
            "gpu",
            "gpus",
            "h100-sxm-80gb",
            tuple(GPUS),
            preset_table(GPUS),
            {"gpu_memory": {k: "nvidia-smi / vLLM log" for k in GPUS}},
        ),
    ]
    sweeps = [
        Sweep(
            "tp",
            "tp",
            (1, 2, 4, 8, 16),
            ("users",),
            "tensor parallel",
            "users",
            "Users vs tensor parallelism",
            log_x=True,
        ),
        Sweep(
            "context",
            "context",
            (2048, 4096, 8192, 16384, 32768),
            ("users",),
            "context [token]",
            "users",
            "Users vs context",
            log_x=True,
        ),
    ]
    scenarios = [
        Scenario("fp8 KV", {"kv_bytes": 1}, "fp8 KV cache"),
        Scenario("TP8", {"tp": 8}),
        Scenario("TP16", {"tp": 16}),
    ]
    return WorkbookPlan(
        title="T1 KV cache -> users",
        doc="How many users fit: Llama-3.1-70B on H100 (T1).",
        inputs=inputs,
        presets=presets,
        derived=derived,
        sweeps=sweeps,
        scenarios=scenarios,
        notes=["bf16 weights, bf16 KV unless a scenario says otherwise"],
        givens_text={"context": "8192 token", "tp": "4"},
    )
