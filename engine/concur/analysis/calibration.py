"""Calibrating the decode-step model of ``formulas/llm_throughput.yaml`` on published measurements.

How is this designed, and why?
------------------------------
The pack models one decode step of a replica as::

    t_step = max(memory_time, compute_time / flops_fraction) / efficiency + t_comm + t_fixed

and what a loaded replica delivers per output token (continuous batching with prefill) as::

    t_step_served = t_step + prefill_overlap x max(0, prefill_per_step - prefill_slack)
                    + (1 - prefill_overlap) x (prefill_per_step + passes x pass_overhead)
                    + c_p x t_comm_per_token
    prefill_per_step = c_p x prefill_token_time,  c_p = concurrency x input_tokens / output_tokens
    prefill_slack    = max(0, weights_time / efficiency - compute_time / (flops_fraction x efficiency))

``memory_time`` (weights, with MoE experts uncovered as the batch grows, plus every sequence's
KV cache) and ``compute_time`` (2 flop per active parameter plus attention over the context)
are the roofline at peak; ``flops_fraction`` is the GPU's measured achievable matmul fraction
(gpus catalog); ``t_comm`` the tensor-parallel all-reduces; ``prefill_overlap`` says whether
the engine runs prefill chunks inside decode steps (engines catalog, from each engine's docs).
Three numbers are not physics: ``efficiency``, ``t_fixed`` and ``efficiency_prefill``. They are
fitted here (:mod:`concur.analysis.engine_fits` fits them per engine and GPU family) on
``tests/data/throughput_points.yaml``.

**State.** A :class:`Point` is one measurement, normalised: the terms above *solved by the
pack* (``concur.solve`` on ``llm_throughput`` with efficiency 1, no fixed cost and
efficiency_prefill 1, from the point's architecture numbers and the GPU's catalog entry), plus
concurrency, lengths, the engine, GPU family, source group and the measured per-GPU throughput
and/or per-user rate. The physics lives in the pack only; :func:`evaluate` merely applies the
three fitted numbers to those terms, in numpy, so a fit can evaluate thousands of candidate
triples at once (a test checks it against the pack end to end).

**What a published number means.** Most tables do *not* report a pure decode rate: a static
batch benchmark divides ``batch x output_len`` by a latency that includes the prefill; a
closed-loop or Poisson load test shares the GPU between new prompts and running decodes. Per
``output_tokens`` steps of a batch of ``c`` sequences the GPU also runs ``c`` prefills; an
engine that batches prefills separately (SGLang by default, static batches, vLLM before V1)
pays all of them, one that runs a prefill chunk inside the decode step (vLLM V1, TensorRT-LLM
in-flight batching) pays only what does not fit in the idle compute of a memory-bound step.
The point's ``prefill_overlap`` records which, from its engine and version (:func:`_overlap`).

Worked example (point ``trtllm05-a100-gptj-bs64``): GPT-J 6B fp16 on one A100 (2.039 TB/s,
312 Tflop/s), static batch 64, 128 in / 128 out. Weights 12.1 GB, KV 458,752 B/token x 64 x
192 tokens = 5.64 GB, so the roofline step is 8.70 ms (memory bound). The prefill of 64 x 128
tokens at full compute adds 0.50 ms per step; a static batch hides none of it.

**Fit.** Least absolute deviations of log throughput (the maximum-likelihood fit under Laplace
errors): a squared loss lets one wild point (vLLM on MI300X at batch 256 reaches 7% of the
roofline) drag every other prediction. No scipy: a coarse grid refined around its best cell,
exhaustive and deterministic on two or three parameters. The error a point contributes is on
its per-GPU output throughput where published (what ``served_tokens_per_s`` predicts), else on
its per-user rate (``1 / t_step_served``).

**Consequences.** A bound (efficiency 1, no fixed cost, no communication, no prefill) above
every measurement is a physics check; the calibrated model's cross-validated error is a
usefulness check. Points whose load is not a number (``concurrency: max``) enter the bound test
at the largest concurrency whose KV cache fits beside the weights, but not the fit.

**Non-goals.** Speculative decoding (several tokens per step), expert parallelism and
attention data parallelism (points that use them are read as plain tensor parallelism),
pipeline bubbles, queueing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PackError
from ..lang.library import get_catalog
from ..lang.model import build_model
from ..lang.yamlsafe import load_yaml
from ..solver.question import solve_model

__all__ = [
    "Fit",
    "Point",
    "evaluate",
    "fit_points",
    "gpu_entry",
    "grid_fit",
    "load_points",
    "log_errors",
    "median",
    "point_from",
    "relative_error",
]

# A dtype the source does not state (or names in a way not recognised below) is taken as the
# smallest plausible one -- fp8 for the KV cache, 4-bit for weights: fewer bytes give a higher
# bound, so the bound stays an upper bound whatever the engine really used. Said in the point's notes.
_UNKNOWN_KV_BYTES = 1.0
_UNKNOWN_WEIGHT_BYTES = 0.5
_DTYPE_WORDS = (
    (("fp4", "nvfp4", "mxfp4", "int4", "w4", "awq", "gptq", "4bit", "4-bit"), 0.5),
    (("fp8", "int8", "w8", "e4m3", "e5m2", "8bit"), 1.0),
    (("bf16", "fp16", "half", "bfloat16", "float16"), 2.0),
    (("fp32", "float32"), 4.0),
)
# Lengths of public datasets whose mean the source does not state (tokens, Llama tokenizer):
# ShareGPT as sampled by the vLLM/SGLang serving benchmarks; used only where a point names it.
_DATASET_LENGTHS = {"sharegpt": (256.0, 256.0)}
# Architecture fields the pack needs beyond the KV shapes, read from the models catalog entry
# of the point's concur model id (or from its config family where the catalog lacks the model).
_ARCH_FIELDS = (
    "attention_heads",
    "hidden",
    "experts",
    "experts_per_token",
    "attention",
    "kv_lora_rank",
    "qk_rope_head_dim",
)
_V1_DEFAULT = (0, 8)
"""vLLM version from which the V1 engine (chunked prefill always on) is the default: v0.8.0
release notes, 'V1 engine is enabled by default'."""


@dataclass(frozen=True)
class Point:
    """One published measurement in the units the model uses (bytes, seconds, flop/s, tokens).

    ``measured_per_gpu`` is output tok/s per GPU and ``measured_per_user`` output tok/s per
    user; either may be ``None``. ``fit`` is false for points whose load is not a number.
    ``prefill_time`` is one request's prefill at efficiency_prefill 1 (peak x flops_fraction).
    """

    id: str
    engine: str
    gpu: str
    memory_time: float
    compute_time: float
    prefill_time: float
    tp: int
    pp: int
    concurrency: float
    input_tokens: float
    output_tokens: float
    measured_per_gpu: float | None
    measured_per_user: float | None
    fit: bool = True
    assumptions: tuple[str, ...] = field(default=())
    gpu_family: str = "other"
    source_group: str = ""
    flops_fraction: float = 1.0
    t_comm: float = 0.0
    t_comm_per_token: float = 0.0  # s per token of a step (tensor-parallel all-reduce bandwidth)
    prefill_token_time: float = 0.0  # s per prompt token per GPU at efficiency_prefill 1
    t_comm_latency: float = 0.0  # s: the all-reduces' fixed cost of one forward pass
    weights_time: float = 0.0  # s: one read of the weights at full bandwidth
    token_budget: float = 8192.0  # tokens one engine step may carry
    static: bool = False  # a static batch: every prompt is there at the start, prefilled in full passes
    prefill_overlap: float = 0.0
    layers: int = 0
    moe: bool = False

    @property
    def cell(self) -> str:
        """``engine@family``: the key of the constants that predict this point."""
        return f"{self.engine}@{self.gpu_family}"


def _bytes(dtype: Any, notes: list[str], *, kv: bool) -> float:
    """Bytes per stored value: the dtypes catalog for its own names, common spellings by keyword,
    else the smallest plausible width (noted), so that the roofline stays an upper bound."""
    key = str(dtype).strip().lower()
    entries = get_catalog("dtypes").entries
    if key in entries:
        return float(entries[key].values["bytes"][0])
    for words, width in _DTYPE_WORDS:
        if any(w in key for w in words):
            return width
    width = _UNKNOWN_KV_BYTES if kv else _UNKNOWN_WEIGHT_BYTES
    notes.append(f"{'KV' if kv else 'weight'} dtype '{dtype}' not recognised: {width:g} B assumed (highest bound)")
    return width


def _engine(engine: str) -> str:
    text = engine.lower()
    if "sglang" in text:
        return "sglang"
    if "vllm" in text:
        return "vllm"
    if "tensorrt" in text or "trt" in text or "nim" in text:
        return "trtllm"
    return "other"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _mean_from_text(text: Any) -> float | None:
    m = re.search(r"mean\s*~?\s*([\d,.]+)", str(text))
    return float(m.group(1).replace(",", "")) if m else None


def _lengths(raw: Mapping[str, Any], notes: list[str]) -> tuple[float, float]:
    isl, osl = _number(raw.get("isl")), _number(raw.get("osl"))
    totals = re.search(r"(\d+) prompts; ([\d,]+) input tokens in total", str(raw.get("isl", "")))
    if isl is None and totals:
        isl = float(totals.group(2).replace(",", "")) / float(totals.group(1))
        notes.append(f"input length = published total / prompts = {isl:g}")
    if osl is None:
        osl = _mean_from_text(raw.get("osl"))
        if osl is not None:
            notes.append(f"output length = published mean {osl:g}")
    for name, (d_in, d_out) in _DATASET_LENGTHS.items():
        if isl is None and name in str(raw.get("isl", "")).lower():
            isl = d_in
            notes.append(f"input length {d_in:g} assumed for {name}")
        if osl is None and name in str(raw.get("osl", "")).lower():
            osl = d_out
            notes.append(f"output length {d_out:g} assumed for {name}")
    if isl is None:
        m = re.search(r"up to\s*(\d+)", str(raw.get("isl", "")))
        if m and osl is not None:
            isl = osl
            notes.append(f"input length taken equal to the output mean {osl:g} (dataset: up to {m.group(1)})")
    if osl is None and isl is not None:
        osl = isl
        notes.append(f"output length not stated; {isl:g} assumed (KV read is small at this batch)")
    if isl is None or osl is None:
        raise PackError(
            f"point '{raw.get('id')}': cannot tell its input/output lengths", hint="give numeric isl and osl"
        )
    return isl, osl


def _version(text: str) -> tuple[int, ...] | None:
    m = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def _overlap(raw: Mapping[str, Any], engine: str, notes: list[str]) -> float:
    """Whether the point's engine ran prefill chunks inside decode steps (1) or apart (0).

    A static batch (``batch_size``) prefills the whole batch first; SGLang batches prefills
    apart unless ``--enable-mixed-chunk``; vLLM does it from the V1 engine on (v0.8), before that
    only with chunked prefill switched on; TensorRT-LLM's in-flight batching mixes context and
    generation requests in one step."""
    if "batch_size" in raw:
        notes.append("static batch: the prefill of the whole batch runs before its decode steps")
        return 0.0
    if engine == "trtllm":
        return 1.0
    if engine == "vllm":
        version = _version(str(raw.get("engine_version", "")))
        if version is not None and version[:2] >= _V1_DEFAULT:
            return 1.0
        notes.append(f"vLLM {raw.get('engine_version', '?')}: before the V1 engine (v0.8), prefills ran apart")
        return 0.0
    return 0.0


def load_points(path: str | Path) -> list[Point]:
    """Read a throughput-points file (schema of ``tests/data/throughput_points.yaml``).

    Every assumption made to turn a published row into model inputs is recorded in the
    point's ``assumptions``. Raises :class:`PackError` for a row that cannot be interpreted.
    """
    doc = load_yaml(path)
    configs = doc["model_configs_used_for_bounds"]
    return [_point(raw, configs) for raw in doc["points"]]


def gpu_entry(name: str) -> str:
    """The ``gpus`` catalog id for a published GPU name (``H100-SXM-80GB`` -> ``h100-sxm-80gb``).

    Names are compared with case and punctuation removed; the longest catalog id that the name
    starts with wins (``L40S-48GB`` -> ``l40s``). Raises :class:`PackError` when none matches.
    """

    def norm(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    ids = list(get_catalog("gpus").entries)
    key = norm(name)
    exact = [i for i in ids if norm(i) == key]
    if exact:
        return exact[0]
    prefixes = sorted((i for i in ids if key.startswith(norm(i))), key=lambda i: -len(norm(i)))
    if not prefixes:
        raise PackError(f"GPU '{name}' is not in formulas/catalogs/gpus.yaml", hint=f"known: {', '.join(ids)}")
    return prefixes[0]


_TERMS = (
    "memory_time",
    "compute_time",
    "prefill_time",
    "prefill_token_time",
    "t_comm",
    "t_comm_per_token",
    "kv_per_token",
)


def _terms(given: dict[str, Any]) -> dict[str, Any]:
    """The pack's terms for one configuration, in seconds (efficiency 1, no fixed cost, efficiency_prefill 1)."""
    # kv_fit ignore: the measured run did hold this batch, whatever memory settings its engine used
    sol = solve_model(
        build_model(["llm_throughput"]),
        tuple(t for t in _TERMS if t not in given),
        {**given, "efficiency": 1, "t_fixed": 0, "efficiency_prefill": 1, "kv_fit": "ignore"},
    )
    var = sol.model.variable("family")
    family = var.choices[int(sol.values["family"])] if "family" in sol.values else "other"
    return {
        "memory_time": sol.value("memory_time", "s"),
        "compute_time": sol.value("compute_time", "s"),
        "prefill_time": sol.value("prefill_time", "s"),
        "t_comm": sol.value("t_comm", "s"),
        "t_comm_per_token": sol.value("t_comm_per_token", "s/token"),
        "prefill_token_time": sol.value("prefill_token_time", "s/token"),
        "t_comm_latency": sol.value("t_comm_latency", "s"),
        "weights_time": sol.value("weights_read", "B") / sol.value("hbm_bandwidth", "B/s"),
        "kv_per_token": sol.value("kv_per_token", "B/token"),
        "flops_fraction": float(sol.values.get("flops_fraction", 1.0)),
        "family": family,
        "layers": round(sol.values.get("layers", 0)),
        "experts": float(sol.values.get("experts", 0.0)),
    }


def _architecture(raw: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Givens for the pack from a point's config family, completed from the models catalog."""
    params = float(cfg["params"])
    given: dict[str, Any] = {
        "params": f"{params!r} parameter",
        "active_params": f"{float(cfg.get('active_params', params))!r} parameter",
        "layers": int(cfg["layers"]),
        "kv_heads": int(cfg["kv_heads"]),
        "head_dim": int(cfg["head_dim"]),
    }
    entry = get_catalog("models").entries.get(str(raw.get("model", "")))
    values = {k: v[0] for k, v in entry.values.items()} if entry is not None else {}
    for key in _ARCH_FIELDS:
        value = cfg.get(key, values.get(key))
        if value is not None:
            given[key] = value
    if given.get("attention") == "mla":  # MLA: the latent, not the config family's GQA encoding of its bytes
        given["kv_heads"], given["head_dim"] = int(values["kv_heads"]), int(values["head_dim"])
    for key in ("sliding_window", "sliding_window_layers"):
        if cfg.get(key):
            given[key] = cfg[key]
    return given


def point_from(
    pid: str,
    given: Mapping[str, Any],
    *,
    engine: str,
    concurrency: float,
    input_tokens: float,
    output_tokens: float,
    measured_per_gpu: float | None,
    measured_per_user: float | None,
    prefill_overlap: float,
    source_group: str = "",
    fit: bool = True,
    assumptions: Sequence[str] = (),
    static: bool = False,
) -> Point:
    """A :class:`Point` for one configuration (``given``: pack givens without load or lengths), solved by the pack."""
    terms = _terms(
        {**given, "concurrency": float(concurrency), "input_tokens": input_tokens, "output_tokens": output_tokens}
    )
    tp, pp = int(given.get("tp", 1)), int(given.get("pp", 1))
    return Point(
        id=pid,
        engine=engine,
        gpu=str(given.get("gpu", "")),
        memory_time=terms["memory_time"],
        compute_time=terms["compute_time"],
        prefill_time=terms["prefill_time"],
        tp=tp,
        pp=pp,
        concurrency=float(concurrency),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        measured_per_gpu=measured_per_gpu,
        measured_per_user=measured_per_user,
        fit=fit,
        assumptions=tuple(assumptions),
        gpu_family=terms["family"],
        source_group=source_group,
        flops_fraction=terms["flops_fraction"],
        t_comm=terms["t_comm"],
        t_comm_per_token=terms["t_comm_per_token"],
        prefill_token_time=terms["prefill_token_time"],
        t_comm_latency=terms["t_comm_latency"],
        weights_time=terms["weights_time"],
        static=static,
        prefill_overlap=prefill_overlap,
        layers=terms["layers"],
        moe=terms["experts"] > 0,
    )


def _point(raw: Mapping[str, Any], configs: Mapping[str, Any]) -> Point:
    notes: list[str] = []
    pid = str(raw["id"])
    gpu = gpu_entry(str(raw["gpu"]))
    nominal = get_catalog("gpus").entries[gpu].values["memory_nominal"][0] * 1e9
    cfg = configs[raw["config_family_for_bounds"]]
    n_gpus = int(raw.get("n_gpus", 1))
    if "tp" in raw:
        tp, pp = int(raw["tp"]), int(raw.get("pp", 1))
    else:
        tp, pp = 1, 1
        notes.append(f"parallelism not published: {n_gpus} replicas of TP1 assumed (the highest per-GPU bound)")
    w_bytes = _bytes(raw.get("weights", "unknown"), notes, kv=False)
    kv_bytes = _bytes(raw.get("kv", "unknown"), notes, kv=True)
    params = float(cfg["params"])
    isl, osl = _lengths(raw, notes)
    given: dict[str, Any] = {
        **_architecture(raw, cfg),
        "gpu": gpu,
        "tp": tp,
        "pp": pp,
        "weight_bytes": f"{w_bytes} B/parameter",
        "kv_bytes": f"{kv_bytes} B/token",
    }
    measured = raw.get("measured", {})
    replicas = max(1, n_gpus // (tp * pp))
    per_gpu = _number(measured.get("output_tok_s_per_gpu"))
    aggregate = _number(measured.get("output_tok_s_aggregate"))
    if per_gpu is None and aggregate is not None:
        per_gpu = aggregate / n_gpus
    per_user = _number(measured.get("output_tok_s_per_user"))
    fit = True
    conc = _number(raw.get("batch_size")) or _number(raw.get("concurrency"))
    load = str(raw.get("concurrency", ""))
    if conc is None and per_user and per_gpu:
        conc = per_gpu * n_gpus / per_user / replicas
        notes.append(f"concurrency {conc:.0f} per replica from Little's law (throughput / per-user rate)")
    if conc is None:
        rate = re.search(r"([\d.]+)\s*req/s", load)
        latency = _number(measured.get("e2e_latency_ms_median"))
        if rate and latency:
            conc = float(rate.group(1)) * latency / 1000.0
            notes.append(f"concurrency {conc:.2f} from Little's law (rate x median latency)")
    engine = _engine(str(raw.get("engine", "")))
    if conc is None:
        one = _terms({**given, "concurrency": 1, "input_tokens": isl, "output_tokens": osl})
        free = nominal - params * w_bytes / (tp * pp)
        conc = math.floor(free / (one["kv_per_token"] * (isl + osl)))
        fit = False
        notes.append(
            f"load '{load}': concurrency {conc} = most sequences whose KV fits beside the weights; left out of the fit"
        )
    if str(raw.get("speculative_decoding", "none")) != "none":
        fit = False
        notes.append(
            f"speculative decoding ({raw['speculative_decoding']}): several tokens per step; left out of the fit"
        )
    overlap = _overlap(raw, engine, notes)
    return point_from(
        pid,
        given,
        engine=engine,
        concurrency=float(conc),
        input_tokens=isl,
        output_tokens=osl,
        measured_per_gpu=per_gpu,
        measured_per_user=per_user,
        prefill_overlap=overlap,
        source_group=str(raw.get("source_group", "")),
        fit=fit,
        assumptions=notes,
        static="batch_size" in raw,
    )


def evaluate(point: Point, efficiency: Any = 1.0, t_fixed: Any = 0.0, efficiency_prefill: Any = None) -> dict[str, Any]:
    """Apply the fitted numbers to a point's terms; parameters may be numpy arrays (broadcast).

    ``efficiency`` divides the memory side of the step; ``efficiency_prefill`` (the engine's
    matmul efficiency with many tokens) divides the compute side and the prefill.
    ``efficiency_prefill=None`` is a pure decode step with ``efficiency`` on both sides and no
    prefill. Returns seconds and tokens/s: ``t_step_bound`` (roofline), ``t_step`` (decode
    step), ``tpot`` (served time per output token, the pack's ``t_step_served``), ``per_user``
    and ``per_gpu`` (served), ``bound_per_user`` and ``bound_per_gpu`` (roofline).
    """
    import numpy as np

    p = point
    c = p.concurrency
    eff = np.asarray(efficiency, dtype=float)
    eff_c = eff
    bound = max(p.memory_time, p.compute_time)
    memory = p.memory_time / eff
    compute = p.compute_time / (p.flops_fraction * eff_c)
    t_step = np.maximum(memory, compute) + p.t_comm + np.asarray(t_fixed, dtype=float)
    tpot = t_step
    if efficiency_prefill is not None:
        c_p = c * p.input_tokens / p.output_tokens  # prompt tokens per step (steady state)
        ptt = p.prefill_token_time or p.prefill_time / p.input_tokens  # hand-built points may give only prefill_time
        per_step = c_p * ptt / np.asarray(efficiency_prefill, dtype=float)
        ov = p.prefill_overlap
        tf = np.asarray(t_fixed, dtype=float)
        # continuous load: the prompts waiting when a decode step ends; a static batch: all of them at once
        waiting = c * p.input_tokens if p.static else max(p.input_tokens, c_p)
        pass_tokens = min(waiting, p.token_budget)
        passes = (1.0 - ov) * c_p / pass_tokens
        pass_overhead = (
            tf
            + p.t_comm_latency
            + np.maximum(0.0, p.weights_time / eff - pass_tokens * ptt / np.asarray(efficiency_prefill))
        )
        slack = np.maximum(0.0, p.weights_time / eff - compute)  # only the weights' read hides a chunk
        tpot = (
            t_step
            + ov * np.maximum(0.0, per_step - slack)
            + (1.0 - ov) * per_step
            + passes * pass_overhead
            + c_p * p.t_comm_per_token
        )
    gpus = p.tp * p.pp
    return {
        "memory_time": p.memory_time,
        "compute_time": p.compute_time,
        "t_step_bound": bound,
        "t_step": t_step,
        "tpot": tpot,
        "per_user": 1.0 / tpot,
        "per_gpu": c / tpot / gpus,
        "bound_per_user": 1.0 / bound,
        "bound_per_gpu": c / bound / gpus,
    }


def log_errors(
    points: Sequence[Point],
    efficiency: Any,
    t_fixed: Any,
    efficiency_prefill: Any,
    scales: Sequence[float] | None = None,
) -> Any:
    """log(model/measured) per point (last axis): on the per-GPU throughput where published, else per user.

    ``scales`` multiplies ``t_fixed`` point by point (a per-layer cost times each point's
    layers); without it ``t_fixed`` is the per-step cost of every point.
    """
    import numpy as np

    cols = []
    for i, p in enumerate(points):
        tf = t_fixed if scales is None else np.asarray(t_fixed) * scales[i]
        out = evaluate(p, efficiency, tf, efficiency_prefill)
        if p.measured_per_gpu is not None:
            cols.append(np.log(out["per_gpu"] / p.measured_per_gpu))
        else:
            cols.append(np.log(out["per_user"] / p.measured_per_user))
    return np.stack(np.broadcast_arrays(*cols), axis=-1)


def relative_error(point: Point, efficiency: float, t_fixed: float, efficiency_prefill: float) -> float:
    """model/measured - 1 of one point (signed), ``t_fixed`` per step."""
    return math.expm1(float(log_errors([point], efficiency, t_fixed, efficiency_prefill)[0]))


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count); nan for none."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    return (xs[len(xs) // 2] + xs[(len(xs) - 1) // 2]) / 2


@dataclass(frozen=True)
class Fit:
    """Fitted parameters (``t_fixed`` in seconds), the ids of the points used and the in-sample error."""

    efficiency: float
    t_fixed: float
    efficiency_prefill: float
    ids: tuple[str, ...]
    median_abs_error: float


_EFF = (0.02, 1.0)
_TFIX = (0.0, 0.030)
_EFF_PREFILL = (0.05, 1.0)


def grid_fit(
    points: Sequence[Point],
    eta_p: float | None,
    *,
    scales: Sequence[float] | None = None,
    t_range: tuple[float, float] = _TFIX,
    prior: tuple[float, float, float] | None = None,
    prior_weight: float = 0.0,
) -> tuple[float, float, float]:
    """Minimise sum |log error| over (efficiency, t_fixed[, efficiency_prefill]) by refined grids.

    ``eta_p`` fixes efficiency_prefill (else it is fitted too). With ``prior`` (efficiency,
    t_fixed, scale of t_fixed) the loss adds ``prior_weight x (|ln(eff / eff0)| + |ln((t + s) /
    (t0 + s))|)``: a cell with few points is pulled towards a wider fit, by as much as
    ``prior_weight`` points that sit an e-fold off.
    """
    import numpy as np

    floor = np.array([_EFF[0], t_range[0], _EFF_PREFILL[0] if eta_p is None else eta_p])
    ceil = np.array([_EFF[1], t_range[1], _EFF_PREFILL[1] if eta_p is None else eta_p])
    lo, hi = floor.copy(), ceil.copy()
    best = (lo + hi) / 2
    for _ in range(4):
        n = (41, 41, 21 if eta_p is None else 1)
        axes = [np.linspace(lo[i], hi[i], n[i]) for i in range(3)]
        e, t, q = np.meshgrid(*axes, indexing="ij")
        loss = np.abs(log_errors(points, e, t, q, scales)).sum(axis=-1)
        if prior is not None and prior_weight > 0:
            e0, t0, s = prior
            loss = loss + prior_weight * (np.abs(np.log(e / e0)) + np.abs(np.log((t + s) / (t0 + s))))
        k = np.unravel_index(np.argmin(loss), loss.shape)
        best = np.array([e[k], t[k], q[k]])
        span = (hi - lo) / 8
        lo = np.maximum(best - span, floor)
        hi = np.minimum(best + span, ceil)
    return float(best[0]), float(best[1]), float(best[2])


def fit_points(points: Sequence[Point], *, efficiency_prefill: float | None = None) -> Fit:
    """Fit (efficiency, t_fixed per step) and, unless given, efficiency_prefill on ``points``.

    Errors are relative, |model/measured - 1|. Raises :class:`ValueError` with fewer than two points.
    """
    if len(points) < 2:
        raise ValueError(f"a fit needs at least 2 points, got {len(points)}")
    eff, tf, ep = grid_fit(points, efficiency_prefill)
    errs = [abs(relative_error(p, eff, tf, ep)) for p in points]
    return Fit(eff, tf, ep, tuple(p.id for p in points), median(errs))
