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
from ..lang.units import unit_info
from ..lang.yamlsafe import load_yaml
from ..solver.question import solve_model
from ..sweep import sweep

__all__ = [
    "FITTED",
    "Fit",
    "Point",
    "cross_validated_error",
    "distinct_loads",
    "evaluate",
    "fast_fit",
    "fit_points",
    "gpu_entry",
    "grid_fit",
    "load_points",
    "load_terms",
    "log_errors",
    "median",
    "point_from",
    "point_log_errors",
    "relative_error",
    "unidentified",
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
    served_extra_time: float = 0.0  # s: MoE experts a mean mixed step's prompt chunks add to the decodes' read
    pass_weights_time: float | None = (
        None  # s: a separate prefill pass's read (MoE: the experts it touches); None = weights_time
    )
    token_budget: float = 8192.0  # tokens one engine step may carry
    static: bool = False  # a static batch: every prompt is there at the start, prefilled in full passes
    prefill_overlap: float = 0.0
    layers: int = 0
    moe: bool = False
    verify_tokens: int = 1  # tokens per sequence a step verifies: draft_tokens + 1 with speculative decoding

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
    "weights_read",
    "prefill_weights_read",
    "pass_weights_read",
)


# The terms are the physics alone: efficiency 1, no fixed cost, efficiency_prefill 1. kv_fit and
# context_fit ignore: the measured run did hold this batch and these lengths, whatever memory settings
# and context window its engine used.
_TERM_SETTINGS = {"efficiency": 1, "t_fixed": 0, "efficiency_prefill": 1, "kv_fit": "ignore", "context_fit": "ignore"}


def _terms(given: dict[str, Any]) -> dict[str, Any]:
    """The pack's terms for one configuration, in seconds (:data:`_TERM_SETTINGS`)."""
    sol = solve_model(
        build_model(["llm_throughput"]), tuple(t for t in _TERMS if t not in given), {**given, **_TERM_SETTINGS}
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
        "weights_read": sol.value("weights_read", "B"),
        "prefill_weights_read": sol.value("prefill_weights_read", "B"),
        "pass_weights_read": sol.value("pass_weights_read", "B"),
        # MoE: the experts a mixed step's prompt chunks add to the decodes' read, and a prefill pass's read
        "served_extra_time": (sol.value("prefill_weights_read", "B") - sol.value("weights_read", "B"))
        / sol.value("hbm_bandwidth", "B/s"),
        "pass_weights_time": sol.value("pass_weights_read", "B") / sol.value("hbm_bandwidth", "B/s"),
        "kv_per_token": sol.value("kv_per_token", "B/token"),
        "flops_fraction": float(sol.values.get("flops_fraction", 1.0)),
        "family": family,
        "layers": round(sol.values.get("layers", 0)),
        "experts": float(sol.values.get("experts", 0.0)),
    }


def load_terms(given: Mapping[str, Any], loads: Sequence[tuple[float, float, float]]) -> list[dict[str, Any]]:
    """:func:`_terms` for many loads (concurrency, input tokens, output tokens) of one configuration.

    One vectorised sweep of the pack over the distinct loads instead of one solve each (a
    solve costs ~3 ms, the sweep ~0.1 ms a load); what does not depend on the load (GPU
    family, flops fraction, layers, experts) comes from one scalar solve of the first load,
    which also checks the sweep's units against it. Loads the sweep leaves without an answer
    are solved one by one (so their error is the scalar solve's).
    """
    import numpy as np

    distinct = sorted(set(loads))
    first = _terms(
        {**given, "concurrency": distinct[0][0], "input_tokens": distinct[0][1], "output_tokens": distinct[0][2]}
    )
    base = {**given, **_TERM_SETTINGS}
    names = [t for t in _TERMS if t not in given]
    model = build_model(["llm_throughput"])
    over = {k: np.asarray([load[i] for load in distinct]) for i, k in enumerate(_LOAD_NAMES)}
    swept = sweep(model, over, base, names, grid=False, validate=False)
    # display value x display factor = base value; base / unit factor = the unit _terms reads in
    factor = {n: model.variable(n).display.factor / unit_info(_TERM_UNITS[n], variable=n).factor for n in names}
    by_load: dict[tuple[float, float, float], dict[str, Any]] = {}
    for j, load in enumerate(distinct):
        row = {n: float(swept[n][j]) * factor[n] for n in names}
        if any(math.isnan(v) for v in row.values()):
            by_load[load] = _terms({**given, **dict(zip(_LOAD_NAMES, load, strict=True))})
            continue
        terms = {**first, **{n: first[n] if n in given else row[n] for n in _TERMS}}
        # the weights' read grows with the batch for MoE models: its time at this load, at the first's bandwidth
        per_byte = first["weights_time"] / first["weights_read"]
        terms["weights_time"] = per_byte * terms["weights_read"]
        terms["served_extra_time"] = per_byte * (terms["prefill_weights_read"] - terms["weights_read"])
        terms["pass_weights_time"] = per_byte * terms["pass_weights_read"]
        by_load[load] = terms
    for n in names:  # the sweep's units are the solve's: checked on the first load
        if not math.isclose(by_load[distinct[0]][n], first[n], rel_tol=1e-9, abs_tol=1e-15):
            raise AssertionError(
                f"load_terms: the sweep gave {n} = {by_load[distinct[0]][n]!r}, the solve {first[n]!r}"
            )
    return [by_load[load] for load in loads]


_LOAD_NAMES = ("concurrency", "input_tokens", "output_tokens")
_TERM_UNITS = {
    "memory_time": "s",
    "compute_time": "s",
    "prefill_time": "s",
    "prefill_token_time": "s/token",
    "t_comm": "s",
    "t_comm_per_token": "s/token",
    "kv_per_token": "B/token",
    "weights_read": "B",
    "prefill_weights_read": "B",
    "pass_weights_read": "B",
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
    terms: Mapping[str, Any] | None = None,
    draft_tokens: int = 0,
) -> Point:
    """A :class:`Point` for one configuration (``given``: pack givens without load or lengths), solved by the pack.

    ``terms``: the pack's terms for this load when already solved (:func:`load_terms`).
    ``draft_tokens``: a speculative point's draft length; its step verifies draft_tokens + 1 tokens per
    sequence (the pack's compute_time and t_comm count them) and emits at most that many.
    """
    if terms is None:
        # the bound's terms leave the draft's own steps out (a bound may only be optimistic): said, not assumed
        spec = {"draft_tokens": draft_tokens, "draft_params": 0} if draft_tokens else {}
        terms = _terms(
            {
                **given,
                **spec,
                "concurrency": float(concurrency),
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
            }
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
        served_extra_time=terms.get("served_extra_time", 0.0),
        pass_weights_time=terms.get("pass_weights_time"),
        static=static,
        prefill_overlap=prefill_overlap,
        layers=terms["layers"],
        moe=terms["experts"] > 0,
        verify_tokens=1 + draft_tokens,
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
    draft = 0
    if str(raw.get("speculative_decoding", "none")) != "none":
        fit = False
        draft = int(raw.get("draft_tokens", 0))
        notes.append(
            f"speculative decoding ({raw['speculative_decoding']}): up to {draft + 1} tokens per step; left out of the fit"
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
        draft_tokens=draft,
    )


def evaluate(point: Point, efficiency: Any = 1.0, t_fixed: Any = 0.0, efficiency_prefill: Any = None) -> dict[str, Any]:
    """Apply the fitted numbers to a point's terms; parameters may be numpy arrays (broadcast).

    ``efficiency`` divides the memory side of the step; ``efficiency_prefill`` (the engine's
    matmul efficiency with many tokens) divides the compute side and the prefill.
    ``efficiency_prefill=None`` is a pure decode step with ``efficiency`` on both sides and no
    prefill. Returns seconds and tokens/s: ``t_step_bound`` (roofline), ``t_step`` (decode
    step), ``tpot`` (served time per output token, the pack's ``t_step_served``), ``per_user``
    and ``per_gpu`` (served), ``bound_per_user`` and ``bound_per_gpu`` (roofline). A speculative
    point (``verify_tokens`` > 1) is bounded at verify_tokens tokens per sequence and step, its step
    doing that many tokens' FLOPs (the pack's ``bound_tokens_per_s``); its served numbers here leave
    the draft and the acceptance out, so only its bound is meaningful.
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
        pass_read = p.weights_time if p.pass_weights_time is None else p.pass_weights_time
        pass_overhead = (
            tf
            + p.t_comm_latency
            + np.maximum(0.0, pass_read / eff - pass_tokens * ptt / np.asarray(efficiency_prefill))
        )
        slack = np.maximum(0.0, p.weights_time / eff - compute)  # only the weights' read hides a chunk
        tpot = (
            t_step
            + ov * np.maximum(p.served_extra_time / eff, per_step - slack)
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
        "bound_per_user": p.verify_tokens / bound,
        "bound_per_gpu": c * p.verify_tokens / bound / gpus,
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
    """Fitted parameters (``t_fixed`` in seconds), the ids of the points used, the in-sample error and
    the error on loads left out of the fit (:func:`cross_validated_error`)."""

    efficiency: float
    t_fixed: float
    efficiency_prefill: float
    ids: tuple[str, ...]
    median_abs_error: float
    loo_median_abs_error: float = float("nan")
    loo: str = ""


_EFF = (0.02, 1.0)
_TFIX = (0.0, 0.030)
_EFF_PREFILL = (0.05, 1.0)


def _columns(points: Sequence[Point], scales: Sequence[float] | None) -> dict[str, Any]:
    """The points' terms as numpy arrays (one entry per point), for :func:`_loss_grid`."""
    import numpy as np

    def col(values: Any) -> Any:
        return np.asarray(list(values), dtype=float)

    # the served step's per-point terms, as :func:`evaluate` computes them
    c_p = col(p.concurrency * p.input_tokens / p.output_tokens for p in points)
    ptt = col(p.prefill_token_time or p.prefill_time / p.input_tokens for p in points)
    waiting = col(p.concurrency * p.input_tokens if p.static else max(p.input_tokens, cp) for p, cp in zip(points, c_p))
    pass_tokens = np.minimum(waiting, col(p.token_budget for p in points))
    overlap = col(p.prefill_overlap for p in points)
    use_gpu = np.asarray([p.measured_per_gpu is not None for p in points])
    measured = [p.measured_per_gpu if p.measured_per_gpu is not None else p.measured_per_user for p in points]
    return {
        "c": col(p.concurrency for p in points),
        "memory": col(p.memory_time for p in points),
        "compute": col(p.compute_time for p in points),
        "ff": col(p.flops_fraction for p in points),
        "comm": col(p.t_comm for p in points),
        "c_p": c_p,
        "ptt": ptt,
        "passes": (1.0 - overlap) * c_p / pass_tokens,
        "pass_tokens": pass_tokens,
        "weights": col(p.weights_time for p in points),
        "pass_weights": col(p.weights_time if p.pass_weights_time is None else p.pass_weights_time for p in points),
        "served_extra": col(p.served_extra_time for p in points),
        "comm_latency": col(p.t_comm_latency for p in points),
        "comm_per_token": col(p.t_comm_per_token for p in points),
        "overlap": overlap,
        "gpus": col(p.tp * p.pp for p in points),
        "measured": col(measured),
        "use_gpu": use_gpu,
        "scales": None if scales is None else col(scales),
    }


_CHUNK = 1 << 21  # grid cells x points evaluated at once (16 MB per float array)


def _loss_grid(cols: Mapping[str, Any], e: Any, t: Any, q: Any, *, per_point: bool = False) -> Any:
    """sum over points of |log(model/measured)| at every cell of the grids ``e``, ``t``, ``q`` (same shape).

    The same arithmetic, in the same order, as :func:`log_errors` (so the same loss to the
    last bit), evaluated for all points at once: one (cells x points) block per chunk of
    cells instead of a Python loop over points.
    """
    import numpy as np

    shape = e.shape
    e, t, q = e.reshape(-1, 1), t.reshape(-1, 1), q.reshape(-1, 1)
    n = len(cols["c"])
    step = max(1, _CHUNK // max(1, n))
    out = np.empty(e.shape[0])
    scales = cols["scales"]
    for lo in range(0, e.shape[0], step):
        ee, tt, qq = e[lo : lo + step], t[lo : lo + step], q[lo : lo + step]
        memory = cols["memory"] / ee
        compute = cols["compute"] / (cols["ff"] * ee)
        tf = tt if scales is None else tt * scales
        t_step = np.maximum(memory, compute) + cols["comm"] + tf
        per_step = cols["c_p"] * cols["ptt"] / qq
        ov = cols["overlap"]
        weights = cols["weights"] / ee
        pass_read = cols["pass_weights"] / ee
        pass_overhead = tf + cols["comm_latency"] + np.maximum(0.0, pass_read - cols["pass_tokens"] * cols["ptt"] / qq)
        slack = np.maximum(0.0, weights - compute)  # only the weights' read hides a chunk
        tpot = (
            t_step
            + ov * np.maximum(cols["served_extra"] / ee, per_step - slack)
            + (1.0 - ov) * per_step
            + cols["passes"] * pass_overhead
            + cols["c_p"] * cols["comm_per_token"]
        )
        rate = np.where(cols["use_gpu"], cols["c"] / tpot / cols["gpus"], 1.0 / tpot)
        if per_point:  # one cell: (log errors, served steps) per point
            return np.log(rate / cols["measured"])[0], tpot[0]
        out[lo : lo + step] = np.abs(np.log(rate / cols["measured"])).sum(axis=-1)
    return out.reshape(shape)


def _point_logs(cols: Mapping[str, Any], e: float, t: float, q: float, *, tpot: bool = False) -> Any:
    """log(model/measured) of every point at one (efficiency, t_fixed, efficiency_prefill);
    with ``tpot`` the served step of every point instead."""
    one = _loss_grid(cols, _arr(e), _arr(t), _arr(q), per_point=True)
    return one[1] if tpot else one[0]


def point_log_errors(points: Sequence[Point], efficiency: float, t_fixed: float, efficiency_prefill: float) -> Any:
    """:func:`log_errors` at one triple, vectorised over the points (``t_fixed`` per step)."""
    return _point_logs(_columns(points, None), efficiency, t_fixed, efficiency_prefill)


def _arr(x: float) -> Any:
    import numpy as np

    return np.full((1,), float(x))


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


def _search(
    cols: Mapping[str, Any],
    eta_p: float | None,
    lo: Any,
    hi: Any,
    plan: Sequence[tuple[int, int, int]],
    shrink: float = 4.0,
) -> tuple[Any, Any, Any]:
    """Refined grids over the box [lo, hi]: one round per entry of ``plan`` (points per axis);
    each round halves the box, centred on the best cell (gently: the loss of a fit whose
    constants trade off is a long narrow valley, and the best cell of a coarse grid can lie
    far along it from the optimum). Returns (best, lo, hi)."""
    import numpy as np

    floor = np.array([_EFF[0], _TFIX[0], _EFF_PREFILL[0] if eta_p is None else eta_p])
    ceil = np.array([_EFF[1], _TFIX[1], _EFF_PREFILL[1] if eta_p is None else eta_p])
    best = (lo + hi) / 2
    for sizes in plan:
        n = (sizes[0], sizes[1], sizes[2] if eta_p is None else 1)
        axes = [np.linspace(lo[i], hi[i], n[i]) for i in range(3)]
        e, t, q = np.meshgrid(*axes, indexing="ij")
        k = np.unravel_index(np.argmin(_loss_grid(cols, e, t, q)), e.shape)
        best = np.array([e[k], t[k], q[k]])
        span = (hi - lo) / shrink
        lo = np.maximum(best - span, floor)
        hi = np.minimum(best + span, ceil)
    return best, lo, hi


_COARSE = 64  # points the full-box search runs on
_MIDDLE = 512  # points the first refinement runs on


def fast_fit(
    points: Sequence[Point],
    eta_p: float | None,
    *,
    max_points: int | None = None,
    loads: Sequence[tuple[float, float, float]] | None = None,
) -> tuple[float, float, float]:
    """What :func:`grid_fit` minimises (no scales, no prior), at a cost that grows slowly with the points.

    Coarse to fine on growing samples: grid_fit's full-box search (four rounds of 41 x 41 x 21,
    each keeping a quarter of the box) on at most 64 points spread evenly over the loads
    (sorted by concurrency and lengths), four rounds of 9 x 9 x 7 from a box of +-1/32 of the
    full range on at most 512, and four of 7 x 7 x 5 from +-1/128 on all of them (or on
    ``max_points``). A subsample's optimum lies well inside the next box. Cost: about 0.15 s
    plus 0.1 s per 1,000 points, where ``grid_fit`` costs 0.5 s per 100 points. ``loads``: the points'
    loads (:func:`_load`) when the caller has them already.
    """
    import numpy as np

    keys = [_load(p) for p in points] if loads is None else loads
    order = sorted(range(len(points)), key=keys.__getitem__)

    def sample(m: int) -> list[Point]:
        if len(points) <= m:
            return list(points)
        return [points[order[(k * len(points)) // m]] for k in range(m)]

    floor = np.array([_EFF[0], _TFIX[0], _EFF_PREFILL[0] if eta_p is None else eta_p])
    ceil = np.array([_EFF[1], _TFIX[1], _EFF_PREFILL[1] if eta_p is None else eta_p])
    # the first stage is grid_fit's own search (same grids, same shrinking) on the sample, so that on
    # at most _COARSE points fast_fit answers what grid_fit does
    best, _, _ = _search(_columns(sample(_COARSE), None), eta_p, floor, ceil, [(41, 41, 21)] * 4, shrink=8.0)
    last = len(points) if max_points is None else min(len(points), max_points)
    for m, width, sizes in ((_MIDDLE, 32, (9, 9, 7)), (last, 128, (7, 7, 5))):
        if len(points) <= _COARSE or m <= _COARSE:
            break
        span = (ceil - floor) / width
        lo, hi = np.maximum(best - span, floor), np.minimum(best + span, ceil)
        best, _, _ = _search(_columns(sample(m), None), eta_p, lo, hi, [sizes] * 4)
        if len(points) <= m:
            break
    return float(best[0]), float(best[1]), float(best[2])


FITTED = ("efficiency", "t_fixed", "efficiency_prefill")
_FOLDS = 10  # more distinct loads than this: grouped 10-fold cross-validation instead of one fit per load
_COLLINEAR = 0.01  # smallest singular value of the column-normalised sensitivities that still identifies


def distinct_loads(points: Sequence[Point]) -> list[tuple[float, float, float]]:
    """The points' distinct loads (concurrency, input tokens, output tokens), sorted."""
    return sorted({_load(p) for p in points})


def unidentified(points: Sequence[Point], eta_p: float | None, at: tuple[float, float, float]) -> str | None:
    """The name of a fitted constant the points' loads cannot pin down near ``at``, else None.

    Each distinct load contributes one independent number (a run's throughput is its
    concurrency over its TPOT: the two measurements of a run are one). The sensitivity of
    each load's log prediction to ln efficiency, t_fixed (per 1 % of the load's step) and
    ln efficiency_prefill (unless ``eta_p`` fixes it) forms a loads x constants matrix; with
    its columns scaled to unit length, a smallest singular value under 0.01 means some
    combination of the constants moves no prediction by more than 1 % of what the others
    do: the data cannot tell them apart. The constant that weighs most in that combination
    is named (a column of zeros: that constant changes nothing at all).
    """
    import numpy as np

    reps: dict[tuple[float, float, float], Point] = {}
    for p in points:
        reps.setdefault(_load(p), p)
    cols_ = _columns(list(reps.values()), None)
    names = list(FITTED if eta_p is None else FITTED[:2])
    eff, tf, ep = at

    def logs(e: float, t: float, q: float) -> Any:
        return _point_logs(cols_, e, t, q)

    h = 0.05
    dt = 0.01 * float(np.median(_point_logs(cols_, eff, tf, ep, tpot=True)))  # 1 % of a typical step
    cols = [
        (logs(eff * math.exp(h), tf, ep) - logs(eff * math.exp(-h), tf, ep)) / (2 * h),
        (logs(eff, tf + dt, ep) - logs(eff, tf, ep)) / 0.01,
    ]
    if eta_p is None:
        cols.append((logs(eff, tf, ep * math.exp(h)) - logs(eff, tf, ep * math.exp(-h))) / (2 * h))
    jac = np.stack(cols, axis=1)
    norms = np.linalg.norm(jac, axis=0)
    for name, norm in zip(names, norms, strict=True):
        if norm < 1e-9:
            return name
    _, sv, vt = np.linalg.svd(jac / norms, full_matrices=False)
    if sv[-1] < _COLLINEAR * math.sqrt(len(names)):
        return names[int(np.argmax(np.abs(vt[-1])))]
    return None


def cross_validated_error(
    points: Sequence[Point], eta_p: float | None, *, max_points: int = _MIDDLE
) -> tuple[float, str]:
    """Median |model/measured - 1| of predictions for loads left out of the fit, and how they were left out.

    Leave one load out (every point of that load) when there are at most 10 distinct loads,
    else 10 folds of loads (every 10th load in sorted order): a load repeated by several runs
    is never both in the fit and predicted. Each fold is fitted with :func:`fast_fit` on at
    most ``max_points`` of its points.
    """
    keys = [_load(p) for p in points]
    loads = sorted(set(keys))
    if len(loads) <= _FOLDS:
        fold_of = {load: i for i, load in enumerate(loads)}
        how = f"leave one load out ({len(loads)} fits)"
    else:
        fold_of = {load: i % _FOLDS for i, load in enumerate(loads)}
        how = f"{_FOLDS} folds of the {len(loads)} loads"
    errors: list[float] = []
    for fold in sorted(set(fold_of.values())):
        inside = [fold_of[k] == fold for k in keys]
        train = [p for p, out in zip(points, inside, strict=True) if not out]
        test = [p for p, out in zip(points, inside, strict=True) if out]
        train_keys = [k for k, out in zip(keys, inside, strict=True) if not out]
        eff, tf, ep = fast_fit(train, eta_p, max_points=max_points, loads=train_keys)
        errors.extend(abs(math.expm1(float(x))) for x in point_log_errors(test, eff, tf, ep))
    return median(errors), how


def _load(point: Point) -> tuple[float, float, float]:
    """A point's load: concurrency and mean lengths (points of one run share it)."""
    return (round(point.concurrency, 6), round(point.input_tokens, 3), round(point.output_tokens, 3))


def fit_points(points: Sequence[Point], *, efficiency_prefill: float | None = None) -> Fit:
    """Fit (efficiency, t_fixed per step) and, unless given, efficiency_prefill on ``points``.

    Errors are relative, |model/measured - 1|: in-sample, and on loads left out of the fit.
    Raises :class:`ValueError` when the points' distinct loads are fewer than the constants
    fitted plus one, or cannot tell the constants apart (:func:`unidentified`).
    """
    fitted = FITTED if efficiency_prefill is None else FITTED[:2]
    loads = distinct_loads(points)
    if len(loads) < len(fitted) + 1:
        raise ValueError(
            f"a fit of {len(fitted)} constants ({', '.join(fitted)}) needs points at {len(fitted) + 1} or more "
            f"distinct loads (concurrency, input and output tokens), got {len(loads)}"
        )
    eff, tf, ep = grid_fit(points, efficiency_prefill)
    blind = unidentified(points, efficiency_prefill, (eff, tf, ep))
    if blind is not None:
        raise ValueError(f"the points' {len(loads)} loads cannot identify {blind}: it trades off against the others")
    errs = [abs(relative_error(p, eff, tf, ep)) for p in points]
    loo, how = cross_validated_error(points, efficiency_prefill)
    return Fit(eff, tf, ep, tuple(p.id for p in points), median(errs), loo, how)
