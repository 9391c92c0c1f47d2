"""Engine constants per (engine x GPU family), fitted with leave-one-source-out validation.

How is this designed, and why?
------------------------------
The decode step of ``formulas/llm_throughput.yaml`` has three constants that are not physics:
``efficiency`` (fraction of the roofline a step reaches), the fixed cost per layer
``t_layer`` (``t_fixed = layers x t_layer``, times ``moe_layer_factor`` for MoE layers) and
``efficiency_prefill``. They depend on the engine (its kernels, its scheduler) *and* on the GPU
(what the kernels reach there; AMD's software stack is not NVIDIA's), so one global pair misses
every configuration a little and some a lot: vLLM fitted on three MI300X points made every
vLLM plan on an H100 3.7x too slow.

**Cells.** A cell is ``engine@family`` (``vllm@hopper``). Levels, narrowest first:

1. the cell itself, when it has at least :data:`MIN_POINTS` usable points;
2. the engine over all GPUs (``vllm@other`` in the catalog), likewise;
3. the global fit over every engine and GPU.

A cell is fitted with a penalty pulling it towards its engine's fit (``PRIOR_WEIGHT`` points'
worth of |log error| per e-fold away): three points from one publisher can otherwise put a cell
anywhere. ``efficiency_prefill`` is *not* fitted on the throughput points: it is fitted first, on
low-load prefill measurements only (TTFT at concurrency 1, ``tests/data/prefill_points.yaml``, by
:func:`fit_prefill`), and held fixed while the decode constants are fitted. A loaded TTFT holds
queueing the model adds itself; fitting on it made a 1,000-token 70B TP4 prefill 218 ms (vLLM)
where the GPUs take about a third of that. ``moe_layer_factor`` is one
number over everything, chosen from :data:`MOE_FACTORS` by the total error. The engine-agnostic
entry ``default`` has the same shape: per-family fits over every engine, then the global fit.

**Validation.** Points carry a ``source_group`` (a publisher and its method). Leave-one-source-out
refits *everything* above -- cells, engines, the MoE factor -- without one group and predicts
that group's points with the constants their cell resolves to in the refit (often a wider level:
with InferenceX held out there are no SGLang points on AMD GPUs left). The median of those
errors is the honest figure; in-sample errors are shown next to it and are always lower.

Worked example: ``gps-h100-qwen3-8b-bf16-vllm-sharegpt-c1`` (Qwen3-8B bf16, one H100, vLLM,
batch 1) is predicted by ``vllm@hopper``; holding out ``gpustack-perf-lab`` refits
``vllm@hopper`` on the remaining vLLM-on-Hopper points (the SGLang README's Llama-3.1-70B TP4
runs), and the error of that refit on this point is its cross-validated error.

**Non-goals.** Per-GPU (rather than per-family) constants, per-model constants, uncertainty
bands on a prediction; a cell with no points says so in its source text and uses the wider fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..lang.model import build_model
from ..lang.yamlsafe import load_yaml
from ..solver.question import solve_model
from .calibration import Point, grid_fit, log_errors, median

__all__ = [
    "ENGINES",
    "FAMILIES",
    "MIN_POINTS",
    "MOE_FACTORS",
    "PRIOR_WEIGHT",
    "CrossValidation",
    "FitSet",
    "Level",
    "PrefillFit",
    "cross_validate",
    "fit_prefill",
    "fit_set",
    "scales",
]

FAMILIES = ("ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4")
"""GPU families of the gpus catalog; ``other`` (family unknown) resolves to the engine's fit."""
ENGINES = ("sglang", "trtllm", "vllm")
MIN_POINTS = 3
"""A cell, or an engine over all GPUs, gets its own constants with at least this many usable points."""
PRIOR_WEIGHT = 1.0
"""How hard a cell is pulled towards its engine's fit (points' worth of |log error| per e-fold)."""
MOE_FACTORS = (1.0, 1.5, 2.0, 2.5, 3.0)
"""Candidate ratios of an MoE layer's fixed cost to a dense layer's."""
T_LAYER_RANGE = (0.0, 0.6e-3)
"""Search range of the per-layer fixed cost (s): 0 to 0.6 ms per layer."""
T_LAYER_PRIOR_SCALE = 0.5e-3 / 32
"""Offset of the t_layer penalty (s): differences below ~16 us per layer cost little."""


def scales(points: Sequence[Point], moe_factor: float) -> list[float]:
    """What multiplies ``t_layer`` to give each point's fixed step cost: its layers, MoE layers weighted."""
    return [p.layers * (moe_factor if p.moe else 1.0) for p in points]


@dataclass(frozen=True)
class Level:
    """Fitted constants of one cell, engine or the global fit, and the points they were fitted on."""

    key: str  # "vllm@hopper", "vllm", "default@hopper" or "global"
    efficiency: float
    t_layer: float  # s per dense layer
    efficiency_prefill: float
    ids: tuple[str, ...]
    in_sample: float  # median |model/measured - 1| over ids with these constants


@dataclass(frozen=True)
class FitSet:
    """Every level of one calibration and the MoE layer factor it used."""

    glob: Level
    engines: dict[str, Level] = field(default_factory=dict)
    cells: dict[str, Level] = field(default_factory=dict)
    moe_factor: float = 1.0

    def resolve(self, engine: str, family: str) -> Level:
        """The constants a point of ``engine`` on a ``family`` GPU is predicted with (narrowest level that exists)."""
        cell = self.cells.get(f"{engine}@{family}")
        if cell is not None:
            return cell
        return self.engines.get(engine, self.glob)

    def error(self, point: Point, engine: str | None = None) -> float:
        """model/measured - 1 of ``point`` with the constants of ``engine`` (default: the point's own) on its family."""
        eng = engine or point.engine
        lv = self.resolve(eng, point.gpu_family)
        sc = scales([point], self.moe_factor)
        return math.expm1(float(log_errors([point], lv.efficiency, lv.t_layer, lv.efficiency_prefill, sc)[0]))


@dataclass(frozen=True)
class PrefillFit:
    """efficiency_prefill fitted on low-load TTFTs: the median of the per-point inversions."""

    value: float
    per_point: dict[str, float]  # point id -> the efficiency_prefill that reproduces its TTFT


def fit_prefill(path: str | Path) -> PrefillFit:
    """Invert the pack's TTFT at concurrency 1 for efficiency_prefill, point by point; the median wins.

    Each row of ``path`` (schema of ``tests/data/prefill_points.yaml``) is a TTFT measured with one
    request in flight, so the pack's ``ttft`` there is half a decode step plus the prompt's chunks,
    with no queue; a bisection over forward solves finds the efficiency_prefill giving the measured
    value (ttft falls as it grows). The decode step in it is the run's own measured ITL (roofline
    step plus the fixed cost that makes it up to the measurement), never the catalog's decode
    constants: the prefill fit depends on no other fit. Raises ValueError when no value in
    [0.02, 1] reproduces a point.
    """
    model = build_model(["llm_throughput"])
    out: dict[str, float] = {}
    for raw in load_yaml(path)["points"]:
        given = {k: raw[k] for k in ("engine", "gpu", "tp", "model", "weight_dtype", "kv_dtype") if k in raw}
        given.update(
            input_tokens=f"{float(raw['input_tokens'])!r} token/request",
            output_tokens=f"{float(raw['output_tokens'])!r} token/request",
            concurrency=f"{float(raw['concurrency'])!r} request",
            kv_fit="ignore",
        )
        target = float(raw["ttft_ms"]) * 1e-3
        # the decode step of this very run, measured (ITL at concurrency 1): its fixed part is what
        # the roofline step (efficiency 1, no fixed cost) leaves unexplained
        roofline = {**given, **{f"efficiency_{f}": 1 for f in (*FAMILIES, "other")}}
        bare = solve_model(model, ("t_step",), {**roofline, **{f"t_layer_{f}": "0 ms" for f in (*FAMILIES, "other")}})
        layers = float(bare.values["layers"]) * (
            float(bare.values["moe_layer_factor"]) if bare.values.get("experts") else 1
        )
        per_layer = max(0.0, float(raw["itl_ms"]) * 1e-3 - bare.value("t_step", "s")) / layers
        given = {**roofline, **{f"t_layer_{f}": f"{per_layer!r} s" for f in (*FAMILIES, "other")}}

        def ttft_at(eta: float, given: dict[str, Any] = given) -> float:
            return solve_model(model, ("ttft",), {**given, "efficiency_prefill": eta}).value("ttft", "s")

        lo, hi = 0.02, 1.0  # ttft falls as efficiency_prefill grows: bisect in log space
        if not ttft_at(hi) <= target <= ttft_at(lo):
            raise ValueError(f"{raw['id']}: no efficiency_prefill in [{lo}, {hi}] gives ttft {raw['ttft_ms']} ms")
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if ttft_at(mid) > target else (lo, mid)
        out[str(raw["id"])] = math.sqrt(lo * hi)
    if not out:
        raise ValueError(f"{path}: no prefill points")
    return PrefillFit(median(list(out.values())), out)


def _level(key: str, pts: Sequence[Point], moe: float, eta_p: float | None, prior: Level | None = None) -> Level:
    sc = scales(pts, moe)
    p0 = None if prior is None else (prior.efficiency, prior.t_layer, T_LAYER_PRIOR_SCALE)
    eff, tl, ep = grid_fit(
        pts, eta_p, scales=sc, t_range=T_LAYER_RANGE, prior=p0, prior_weight=PRIOR_WEIGHT if prior is not None else 0.0
    )
    errs = [abs(math.expm1(float(x))) for x in log_errors(pts, eff, tl, ep, sc)]
    return Level(key, eff, tl, ep, tuple(p.id for p in pts), median(errs))


def _fit_at(usable: Sequence[Point], moe: float, eta_p: float | None = None) -> FitSet:
    glob = _level("global", usable, moe, eta_p)
    engines: dict[str, Level] = {}
    cells: dict[str, Level] = {}
    for eng in sorted({p.engine for p in usable}):
        members = [p for p in usable if p.engine == eng]
        if len(members) >= MIN_POINTS:
            engines[eng] = _level(eng, members, moe, eta_p)
    for name in ("default", *sorted(engines)):
        parent = glob if name == "default" else engines[name]
        members = [p for p in usable if name == "default" or p.engine == name]
        for fam in sorted({p.gpu_family for p in members}):
            cell = [p for p in members if p.gpu_family == fam]
            if len(cell) >= MIN_POINTS:
                key = f"{name}@{fam}"
                cells[key] = _level(key, cell, moe, parent.efficiency_prefill, parent)
    return FitSet(glob, engines, cells, moe)


def fit_set(
    points: Sequence[Point], moe_factor: float | None = None, efficiency_prefill: float | None = None
) -> FitSet:
    """Fit every level on the usable points (``fit``); ``moe_factor`` None chooses it from
    :data:`MOE_FACTORS` by the total |log error| of every point predicted with its own engine's constants.
    ``efficiency_prefill`` (from :func:`fit_prefill`) is held fixed at every level; None fits it too
    (only for tests of the fit itself: the shipped catalog never fits it on throughput points).

    Raises :class:`ValueError` with fewer than :data:`MIN_POINTS` usable points.
    """
    usable = [p for p in points if p.fit]
    if len(usable) < MIN_POINTS:
        raise ValueError(f"a calibration needs at least {MIN_POINTS} usable points, got {len(usable)}")
    best: tuple[float, FitSet] | None = None
    for moe in (moe_factor,) if moe_factor is not None else MOE_FACTORS:
        fs = _fit_at(usable, moe, efficiency_prefill)
        loss = sum(abs(math.log1p(fs.error(p))) for p in usable)
        if best is None or loss < best[0]:
            best = (loss, fs)
    assert best is not None
    return best[1]


@dataclass(frozen=True)
class CrossValidation:
    """Leave-one-source-out errors (model/measured - 1) per point id, with and without the engine's constants."""

    with_engine: dict[str, float]
    without_engine: dict[str, float]
    level: dict[str, str]  # the level that predicted each point in its fold
    moe_factors: dict[str, float]  # the MoE factor each fold chose

    def median(self, ids: Sequence[str] | None = None, *, engine: bool = True) -> float:
        errs = self.with_engine if engine else self.without_engine
        keys = list(errs) if ids is None else [i for i in ids if i in errs]
        return median([abs(errs[i]) for i in keys])


def cross_validate(points: Sequence[Point], efficiency_prefill: float | None = None) -> CrossValidation:
    """Leave one ``source_group`` out at a time, refit everything, predict the held-out points."""
    usable = [p for p in points if p.fit]
    with_e: dict[str, float] = {}
    without_e: dict[str, float] = {}
    level: dict[str, str] = {}
    moes: dict[str, float] = {}
    for group in sorted({p.source_group for p in usable}):
        train = [p for p in usable if p.source_group != group]
        held = [p for p in usable if p.source_group == group]
        fs = fit_set(train, efficiency_prefill=efficiency_prefill)
        moes[group] = fs.moe_factor
        for p in held:
            with_e[p.id] = fs.error(p)
            without_e[p.id] = fs.error(p, "default")
            level[p.id] = fs.resolve(p.engine, p.gpu_family).key
    return CrossValidation(with_e, without_e, level, moes)
