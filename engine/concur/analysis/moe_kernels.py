"""The rate an engine's MoE kernels run the routed experts' matmuls at, from the experts' shape.

A prefill's routed experts are grouped GEMMs: each expert multiplies only the tokens routed to it, in
two matmuls per GPU -- gate and up (reduction over ``hidden``, output the expert's slice of
``moe_intermediate``) and down (reduction over that slice, output ``hidden``). Silicon measurements of
the engines' own MoE ops at prefill sizes (``tests/data/moe_kernels.yaml``: 8,192 and 16,384 tokens,
where the matmuls and not the weights' read set the time; H100, H200, B200; four expert shapes; FP8 with
block scales and BF16) fix four constants, each for what it stands for:

* ``moe_gemm_tile_depth`` (K0): every output tile of a matmul pays a fixed cost -- loading its first
  operands, applying scales, writing it back -- worth K0 steps of its reduction. A matmul reducing over
  K runs at K / (K + K0) of its rate, so the grouped GEMMs of one GPU run at::

      shape = 1 / (2/3 x (1 + K0 / hidden) + 1/3 x (1 + K0 / slice))

  of a dense prefill's rate (gate and up are two thirds of the FLOPs; slice is one expert's
  intermediate width on the GPU: moe_intermediate / tp when the experts are sliced tensor-parallel, the
  whole width when whole experts sit on it). This is why slicing the experts over eight GPUs halves the
  kernels' rate for DeepSeek-V3 (slice 256) but not for Mixtral (slice 1,792).
* ``moe_gemm_fp8_rate_<family>``: block-scaled FP8 grouped GEMMs reach a lower fraction of the FP8 peak
  than BF16 ones of the BF16 peak (the scales are applied inside the main loop), and how much lower
  depends on the GPU generation: on B200 the engines' FP8 kernels reach about two thirds of what they
  reach on Hopper against the peak (B200's FP8 peak is 2.3x H200's; its measured FP8 grouped GEMMs are
  about 1.5x). One rate per family with measurements (:data:`FP8_FAMILIES`), ``other`` over every
  family's rows.
* ``moe_gemm_ep_rate`` (per engine): an engine's default expert-parallel op (whole experts per GPU,
  fed every token) against its op with the experts on every GPU, at the same shape and format.
  TensorRT-LLM's runs at about the same rate; vLLM's and SGLang's at half or less.
* ``moe_gemm_deepep_rate``: the wide-EP op (tokens dispatched by DeepEP to their experts' GPUs, grouped
  GEMMs by DeepGEMM; the rows marked ``path: deepep``, SGLang's) against a dense prefill's rate at the
  shape, whatever the format: DeepGEMM's FP8 kernels do not pay the block scales' cost the others do.

K0 and the FP8 rates are fitted once over every engine's rows with the experts sliced or whole on each
GPU (tp 1 or tp 8, no EP): K0 minimises the total |log error| with a BF16 grouped GEMM of a given shape
at a dense prefill's rate (no free level: the shape alone carries the layouts' difference), each
family's FP8 rate is the median of its FP8 rows' remaining ratio. Each engine's EP rate is the median over its EP rows of
the measured rate over that model; ``default``'s over every engine's. The DeepEP rate is the median of
its rows' rate over their shape's (DeepSeek-V3's shape only, so it is left out of the leave-one-shape-out
error). One measured row's rate::

    flops = 2 x tokens x topk x 3 x hidden x moe_intermediate / (tp x ep)   (gate, up, down; one GPU)
    rate  = flops / latency / (peak x flops_fraction x efficiency_prefill)

with the GPU's dense peak of the weights' format (FP8 for fp8 rows, BF16 for bfloat16) and its
flops_fraction from the gpus catalog, and the engines' efficiency_prefill (a dense prefill's fraction of
that peak). Invariant: the pack's moe_gemm_efficiency, min(1, shape x format rate x layout rate), is in
(0, 1].
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..lang.library import get_catalog
from ..lang.yamlsafe import load_yaml

__all__ = [
    "MOE_KERNELS_LABEL",
    "KernelRow",
    "MoeGemmFit",
    "fit_moe_gemm",
    "gpu_value",
    "kernel_rows",
    "log_median",
    "moe_gemm_shape",
    "predicted_rate",
]

MOE_KERNELS_LABEL = "tests/data/moe_kernels.yaml"
FP8_FAMILIES = ("hopper", "blackwell")  # families with a moe_gemm_fp8_rate_<family> field; "other": every row
TILE_DEPTHS = tuple(range(0, 2049, 32))  # the K0 values tried (reduction steps)


@dataclass(frozen=True)
class KernelRow:
    """One measured MoE op: who ran it, its shape on one GPU and its rate over a dense prefill's."""

    engine: str
    gpu: str
    family: str
    model: str
    fp8: bool
    expert_parallel: bool
    deepep: bool  # SGLang's wide-EP op (DeepEP dispatch, DeepGEMM), not the engine's default EP op
    hidden: float
    slice: float
    rate: float


@dataclass(frozen=True)
class MoeGemmFit:
    """The four constants and how well they reproduce the rows.

    ``ep_rate`` maps each engine (and ``default``) to its expert-parallel rate; ``n`` counts the rows
    behind each constant (``tile``: the rows without EP; an engine name: its EP rows; ``deepep``: the
    DeepEP rows). ``error`` is the
    median |log| ratio of predicted to measured rate over every row, ``loso_error`` the same with each
    model shape predicted by constants fitted on the other shapes."""

    tile_depth: float
    fp8_rate: dict[str, float]  # per GPU family of FP8_FAMILIES, and "other" (every family's rows)
    ep_rate: dict[str, float]
    deepep_rate: float
    n: dict[str, int]
    error: float
    loso_error: float


def gpu_value(gpu: Any, name: str, default: float | None = None) -> float:
    """A gpus catalog value in base units (flop/s for peaks); ``default`` where the entry has none."""
    if name not in gpu.values:
        if default is None:
            raise KeyError(f"gpus catalog entry {gpu.id} has no {name}")
        return default
    return float(gpu.values[name][0]) * get_catalog("gpus").fields[name].unit.factor


def kernel_rows(path: str | Path, efficiency_prefill: float) -> list[KernelRow]:
    """Every measured row with its rate over a dense prefill's on the same GPU and format (not capped)."""
    data = load_yaml(Path(path))
    out = []
    for row in data["rows"]:
        shape = data["shapes"][row["shape"]]
        fp8 = str(row["dtype"]).startswith("fp8")
        gpu = get_catalog("gpus").entries[row["gpu"]]
        peak = gpu_value(gpu, "peak_flops_fp8" if fp8 else "peak_flops_bf16")
        dense = peak * gpu_value(gpu, "flops_fraction", 1.0) * efficiency_prefill
        per_token = 2 * shape["topk"] * 3 * shape["hidden"] * shape["moe_intermediate"]  # gate, up, down
        flops = row["tokens"] * per_token / (row["tp"] * row["ep"])
        out.append(
            KernelRow(
                engine=str(row["engine"]),
                gpu=str(row["gpu"]),
                family=str(gpu.values["family"][0]),
                model=str(row["shape"]),
                fp8=fp8,
                expert_parallel=row["ep"] > 1,
                deepep=row.get("path") == "deepep",
                hidden=float(shape["hidden"]),
                slice=float(shape["moe_intermediate"]) / row["tp"],
                rate=float(flops) / (float(row["latency_ms"]) * 1e-3) / dense,
            )
        )
    return out


def moe_gemm_shape(hidden: float, slice_width: float, tile_depth: float) -> float:
    """The grouped GEMMs' rate over a dense prefill's from their reduction depths (the pack's moe_gemm_shape)."""
    return 1.0 / (2.0 / 3.0 * (1.0 + tile_depth / hidden) + 1.0 / 3.0 * (1.0 + tile_depth / slice_width))


def predicted_rate(row: KernelRow, fit: MoeGemmFit) -> float:
    """The pack's moe_gemm_efficiency for the row's engine, shape, format and layout (capped at 1)."""
    if row.deepep:
        return min(1.0, moe_gemm_shape(row.hidden, row.slice, fit.tile_depth) * fit.deepep_rate)
    rate = moe_gemm_shape(row.hidden, row.slice, fit.tile_depth) * (
        fp8_rate(fit.fp8_rate, row.family) if row.fp8 else 1.0
    )
    if row.expert_parallel:
        rate *= fit.ep_rate.get(row.engine, fit.ep_rate["default"])
    return min(1.0, rate)


def fp8_rate(rates: dict[str, float], family: str) -> float:
    """The FP8 rate the pack reads on a GPU of ``family`` (its own where measured, else ``other``)."""
    return rates.get(family, rates["other"])


def log_median(values: Sequence[float]) -> float:
    """The geometric median: exp of the median of the logs (every value positive)."""
    return math.exp(statistics.median(math.log(v) for v in values))


def _fit_constants(rows: Sequence[KernelRow]) -> tuple[float, dict[str, float], dict[str, float], dict[str, int]]:
    """(K0, FP8 rates per family, EP rates, row counts) fitted on the rows of the engines' default ops;
    see the module docstring."""
    whole = [r for r in rows if not r.expert_parallel]

    def fp8_rates(k0: float) -> dict[str, float]:
        def rate(family: str | None) -> float:
            ratios = [
                r.rate / moe_gemm_shape(r.hidden, r.slice, k0) for r in whole if r.fp8 and family in (None, r.family)
            ]
            return log_median(ratios)

        rates = {fam: rate(fam) for fam in FP8_FAMILIES if any(r.fp8 and r.family == fam for r in whole)}
        return {**rates, "other": rate(None)}

    def total_error(k0: float) -> float:
        f = fp8_rates(k0)
        return sum(
            abs(
                math.log(
                    min(1.0, moe_gemm_shape(r.hidden, r.slice, k0) * (fp8_rate(f, r.family) if r.fp8 else 1.0)) / r.rate
                )
            )
            for r in whole
        )

    k0 = min(TILE_DEPTHS, key=total_error)
    f = fp8_rates(k0)
    per: dict[str, list[float]] = {}
    for r in rows:
        if r.expert_parallel and not r.deepep:
            ratio = r.rate / (moe_gemm_shape(r.hidden, r.slice, k0) * (fp8_rate(f, r.family) if r.fp8 else 1.0))
            per.setdefault(r.engine, []).append(ratio)
            per.setdefault("default", []).append(ratio)
    ep = {engine: log_median(ratios) for engine, ratios in per.items()}
    counts = {"tile": len(whole), **{engine: len(ratios) for engine, ratios in per.items()}}
    return float(k0), f, ep, counts


def _median_error(rows: Sequence[KernelRow], fit: MoeGemmFit) -> float:
    return statistics.median(abs(math.log(predicted_rate(r, fit) / r.rate)) for r in rows)


def fit_moe_gemm(path: str | Path, efficiency_prefill: float) -> MoeGemmFit:
    """The engines catalog's MoE kernel constants from the measured rows, with in-sample and
    leave-one-shape-out errors."""
    every = kernel_rows(path, efficiency_prefill)
    rows = [r for r in every if not r.deepep]
    k0, f, ep, counts = _fit_constants(rows)
    deepep = [r for r in every if r.deepep]
    wide = log_median([r.rate / moe_gemm_shape(r.hidden, r.slice, k0) for r in deepep]) if deepep else 1.0
    counts["deepep"] = len(deepep)
    fit = MoeGemmFit(
        round(k0),
        {k: round(v, 3) for k, v in f.items()},
        {k: round(v, 3) for k, v in ep.items()},
        round(wide, 3),
        counts,
        0.0,
        0.0,
    )
    held_out: list[float] = []
    for model in sorted({r.model for r in rows}):
        k, g, e, c = _fit_constants([r for r in rows if r.model != model])
        fold = MoeGemmFit(k, g, e, fit.deepep_rate, c, 0.0, 0.0)
        held_out += [abs(math.log(predicted_rate(r, fold) / r.rate)) for r in rows if r.model == model]
    return replace(fit, error=_median_error(every, fit), loso_error=statistics.median(held_out))
