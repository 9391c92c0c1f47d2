"""Calibrating the decode-step model of ``formulas/llm_throughput.yaml`` on published measurements.

How is this designed, and why?
------------------------------
The pack models one decode step of a replica as::

    t_step = max(memory_time, compute_time) / efficiency + t_fixed
    memory_time  = (weights_read + concurrency * avg_context * kv_per_token) / hbm_bandwidth
    compute_time = 2 flop/parameter/token * active_params_per_gpu * concurrency * 1 token/request / peak_flops

and a request's prefill as ``prefill_time = 2 * active_params * input_tokens / (peak_flops * tp *
efficiency_prefill)``.  Two numbers, ``efficiency`` (the fraction of the roofline an engine
reaches) and ``t_fixed`` (launch, scheduling and sampling cost per step), are not physics: they
are fitted here on ``tests/data/throughput_points.yaml`` and written to
``formulas/catalogs/engines.yaml`` with the error and the points they came from.

**State.** A :class:`Point` is one measurement, normalised: the roofline terms of one decode step
(``memory_time``, ``compute_time``) and the prefill time at full compute, *solved by the pack*
(``concur.solve`` on ``llm_throughput`` with efficiency 1 and no fixed cost, from the point's
architecture numbers and the GPU's catalog entry), plus concurrency, lengths and the measured
per-GPU throughput and/or per-user rate.  The physics lives in the pack only; :func:`evaluate`
merely applies the two fitted numbers to those terms, in numpy, so that a fit can evaluate
thousands of parameter triples at once.

**What a published number means.** Most tables do *not* report a pure decode rate: TensorRT-LLM's
static-batch benchmark divides ``batch * output_len`` by a latency that includes the prefill;
a closed-loop or Poisson load test shares the GPU between new prompts and running decodes.  One
accounting covers all of them: per ``output_tokens`` decode steps of a batch of ``c``
sequences the GPU also runs ``c`` prefills, so each user receives a token every::

    tpot = t_step + c * prefill_time / output_tokens          (served time per output token)
    served per-user rate = 1 / tpot,   served throughput = c / tpot

Worked example (point ``trtllm05-a100-gptj-bs64``): GPT-J 6B fp16 on one A100 (2.039 TB/s,
312 Tflop/s), batch 64, 128 in / 128 out.  Weights 12.1 GB, KV 458,752 B/token x 64 x 192
tokens = 5.64 GB, so the roofline step is 8.70 ms (memory bound; compute is 4.96 ms) and the
pure decode bound is 64 / 8.70 ms = 7,357 tok/s.  The prefill of 64 x 128 tokens costs 63.5 ms
at full compute, adding 0.50 ms per step; the served bound is 7,009 tok/s, the measurement 3,679.

**Fit.** ``t_step = bytes/(efficiency*BW) + t_fixed`` is fitted by minimising the sum of
|log(model/measured)| (least absolute deviations on log throughput).  Squared error was rejected:
the set contains honest outliers (vLLM on MI300X at batch 256 reaches 7% of the roofline) and a
squared loss lets one of them drag every other prediction; the absolute loss is the maximum
likelihood fit under Laplace errors and ignores a single wild point.  There is no scipy in the
dependency set, so the minimiser is a coarse grid refined twice around its best cell, which on
three parameters is exhaustive and deterministic.  ``efficiency_prefill`` is fitted globally (the
prefill only shows through the served accounting); ``efficiency`` and ``t_fixed`` per engine family
when it has at least :data:`MIN_FAMILY_POINTS` usable points, globally otherwise.  Leave-one-out:
each point is predicted by a fit made without it; its median is the honest error figure.

**Consequences.** A bound (efficiency 1, no fixed cost, no prefill) above every measurement is a
physics check; the calibrated model's error is a usefulness check.  Points whose load is not a
number (``concurrency: max``) enter the bound test at the largest concurrency whose KV cache fits
in the GPU memory left after the weights, but are left out of the fit.

**Non-goals.** No per-GPU efficiencies (too few points), no attention FLOPs, no communication
term for tensor parallelism, no model of speculative decoding.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import PackError

__all__ = [
    "gpu_entry",
    "Point",
    "Fit",
    "load_points",
    "evaluate",
    "fit_points",
    "calibrate",
    "Calibration",
    "engines_catalog",
    "write_engines_catalog",
    "MIN_FAMILY_POINTS",
]

MIN_FAMILY_POINTS = 3
"""An engine family gets its own (efficiency, t_fixed) only with at least this many usable points."""

# A dtype the source does not state (or names in a way not recognised below) is taken as the
# smallest plausible one -- fp8 for the KV cache, 4-bit for weights: fewer bytes give a higher
# bound, so the bound stays an upper bound whatever the engine really used. Said in the point's notes.
_UNKNOWN_KV_BYTES = 1.0
_UNKNOWN_WEIGHT_BYTES = 0.5
_DTYPE_WORDS = ((("fp4", "nvfp4", "mxfp4", "int4", "w4", "awq", "gptq", "4bit", "4-bit"), 0.5),
                (("fp8", "int8", "w8", "e4m3", "e5m2", "8bit"), 1.0),
                (("bf16", "fp16", "half", "bfloat16", "float16"), 2.0),
                (("fp32", "float32"), 4.0))
# Lengths of public datasets whose mean the source does not state (tokens, Llama tokenizer):
# ShareGPT as sampled by the vLLM/SGLang serving benchmarks; used only where a point names it.
_DATASET_LENGTHS = {"sharegpt": (256.0, 256.0)}


@dataclass(frozen=True)
class Point:
    """One published measurement in the units the model uses (bytes, seconds, flop/s, tokens).

    ``measured_per_gpu`` is output tok/s per GPU and ``measured_per_user`` output tok/s per
    user; either may be ``None``.  ``fit`` is false for points whose load is not a number.
    """

    id: str
    family: str
    gpu: str
    memory_time: float
    compute_time: float
    prefill_time: float  # one request's prefill at full compute (efficiency_prefill = 1)
    tp: int
    pp: int
    concurrency: float
    input_tokens: float
    output_tokens: float
    measured_per_gpu: float | None
    measured_per_user: float | None
    fit: bool = True
    assumptions: tuple[str, ...] = field(default=())


def _bytes(dtype: Any, notes: list[str], *, kv: bool) -> float:
    """Bytes per stored value: the dtypes catalog for its own names, common spellings by keyword,
    else the smallest plausible width (noted), so that the roofline stays an upper bound."""
    from ..lang.library import get_catalog

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


def _family(engine: str) -> str:
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
        raise PackError(f"point '{raw.get('id')}': cannot tell its input/output lengths",
                        hint="give numeric isl and osl")
    return isl, osl


def load_points(path: str | Path) -> list[Point]:
    """Read a throughput-points file (schema of ``tests/data/throughput_points.yaml``).

    Every assumption made to turn a published row into model inputs is recorded in the
    point's ``assumptions``.  Raises :class:`PackError` for a row that cannot be interpreted.
    """
    from ..lang.yamlsafe import load_yaml

    doc = load_yaml(path)
    configs = doc["model_configs_used_for_bounds"]
    return [_point(raw, configs) for raw in doc["points"]]


def gpu_entry(name: str) -> str:
    """The ``gpus`` catalog id for a published GPU name (``H100-SXM-80GB`` -> ``h100-sxm-80gb``).

    Names are compared with case and punctuation removed; the longest catalog id that the name
    starts with wins (``L40S-48GB`` -> ``l40s``). Raises :class:`PackError` when none matches.
    """
    from ..lang.library import get_catalog

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


def _terms(given: dict[str, Any]) -> dict[str, float]:
    """The pack's roofline terms for one point, in seconds (efficiency 1, no fixed cost)."""
    from ..api import solve

    sol = solve(find=["memory_time", "compute_time", "prefill_time", "kv_per_token"],
                given={**given, "efficiency": 1, "t_fixed": 0, "efficiency_prefill": 1}, packs=["llm_throughput"])
    return {"memory_time": sol.value("memory_time", "s"), "compute_time": sol.value("compute_time", "s"),
            "prefill_time": sol.value("prefill_time", "s"), "kv_per_token": sol.value("kv_per_token", "B/token")}


def _point(raw: Mapping[str, Any], configs: Mapping[str, Any]) -> Point:
    from ..lang.library import get_catalog

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
    active = float(cfg.get("active_params", params))
    isl, osl = _lengths(raw, notes)
    given: dict[str, Any] = {
        "gpu": gpu, "params": f"{params!r} parameter", "active_params": f"{active!r} parameter", "layers": int(cfg["layers"]),
        "kv_heads": int(cfg["kv_heads"]), "head_dim": int(cfg["head_dim"]), "tp": tp, "pp": pp,
        "weight_bytes": f"{w_bytes} B/parameter", "kv_bytes": f"{kv_bytes} B/token",
        "input_tokens": isl, "output_tokens": osl,
    }
    for key in ("sliding_window", "sliding_window_layers"):
        if cfg.get(key):
            given[key] = cfg[key]
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
    if conc is None:
        one = _terms({**given, "concurrency": 1})
        free = nominal - params * w_bytes / (tp * pp)
        conc = math.floor(free / (one["kv_per_token"] * (isl + osl)))
        fit = False
        notes.append(f"load '{load}': concurrency {conc} = most sequences whose KV fits beside the weights; "
                     "left out of the fit")
    terms = _terms({**given, "concurrency": float(conc)})
    return Point(id=pid, family=_family(str(raw.get("engine", ""))), gpu=gpu, memory_time=terms["memory_time"],
                 compute_time=terms["compute_time"], prefill_time=terms["prefill_time"], tp=tp, pp=pp,
                 concurrency=float(conc), input_tokens=isl, output_tokens=osl, measured_per_gpu=per_gpu,
                 measured_per_user=per_user, fit=fit, assumptions=tuple(notes))


def evaluate(point: Point, efficiency: Any = 1.0, t_fixed: Any = 0.0, efficiency_prefill: Any = None) -> dict:
    """Apply the fitted numbers to a point's roofline terms; parameters may be numpy arrays (broadcast).

    ``efficiency_prefill=None`` leaves the prefill out (pure decode).  Returns seconds and
    tokens/s: ``t_step``, ``t_step_bound``, ``tpot`` (served time per output token),
    ``per_user`` and ``per_gpu`` (served), ``bound_per_user`` and ``bound_per_gpu`` (roofline).
    """
    import numpy as np

    c = point.concurrency
    bound = max(point.memory_time, point.compute_time)
    t_step = bound / np.asarray(efficiency, dtype=float) + np.asarray(t_fixed, dtype=float)
    tpot = t_step
    if efficiency_prefill is not None:
        prefill = point.prefill_time / np.asarray(efficiency_prefill, dtype=float)
        tpot = t_step + c * prefill / point.output_tokens
    gpus = point.tp * point.pp
    return {"memory_time": point.memory_time, "compute_time": point.compute_time, "t_step_bound": bound,
            "t_step": t_step, "tpot": tpot, "per_user": 1.0 / tpot, "per_gpu": c / tpot / gpus,
            "bound_per_user": 1.0 / bound, "bound_per_gpu": c / bound / gpus}


def log_errors(points: Sequence[Point], efficiency: Any, t_fixed: Any, efficiency_prefill: Any) -> Any:
    """log(model/measured) per point (last axis), on the per-user rate where published, else per GPU."""
    import numpy as np

    cols = []
    for p in points:
        out = evaluate(p, efficiency, t_fixed, efficiency_prefill)
        if p.measured_per_user is not None:
            cols.append(np.log(out["per_user"] / p.measured_per_user))
        else:
            cols.append(np.log(out["per_gpu"] / p.measured_per_gpu))
    return np.stack(np.broadcast_arrays(*cols), axis=-1)


@dataclass(frozen=True)
class Fit:
    """Fitted parameters (``t_fixed`` in seconds) and the ids of the points used."""

    efficiency: float
    t_fixed: float
    efficiency_prefill: float
    ids: tuple[str, ...]
    median_abs_error: float
    loo_median_abs_error: float | None


_EFF = (0.02, 1.0)
_TFIX = (0.0, 0.030)


def _grid_fit(points: Sequence[Point], eta_p: float | None) -> tuple[float, float, float]:
    """Minimise sum |log error| over (efficiency, t_fixed[, efficiency_prefill]) by refined grids."""
    import numpy as np

    lo = np.array([_EFF[0], _TFIX[0], 0.05 if eta_p is None else eta_p])
    hi = np.array([_EFF[1], _TFIX[1], 1.0 if eta_p is None else eta_p])
    best = (lo + hi) / 2
    for _ in range(4):
        n = (41, 41, 21 if eta_p is None else 1)
        axes = [np.linspace(lo[i], hi[i], n[i]) for i in range(3)]
        e, t, q = np.meshgrid(*axes, indexing="ij")
        loss = np.abs(log_errors(points, e, t, q)).sum(axis=-1)
        k = np.unravel_index(np.argmin(loss), loss.shape)
        best = np.array([e[k], t[k], q[k]])
        span = (hi - lo) / 8
        lo = np.maximum(best - span, [_EFF[0], _TFIX[0], 0.05 if eta_p is None else eta_p])
        hi = np.minimum(best + span, [_EFF[1], _TFIX[1], 1.0 if eta_p is None else eta_p])
    return float(best[0]), float(best[1]), float(best[2])


def _median_abs(points: Sequence[Point], eff: float, tf: float, ep: float) -> float:
    import numpy as np

    return float(np.median(np.abs(np.expm1(log_errors(points, eff, tf, ep)))))


def fit_points(points: Sequence[Point], *, efficiency_prefill: float | None = None, loo: bool = True) -> Fit:
    """Fit (efficiency, t_fixed) and, unless given, efficiency_prefill on ``points``.

    Errors are relative, |model/measured - 1|.  ``loo`` adds the leave-one-out median.
    Raises :class:`ValueError` with fewer than two points.
    """
    import numpy as np

    if len(points) < 2:
        raise ValueError(f"a fit needs at least 2 points, got {len(points)}")
    eff, tf, ep = _grid_fit(points, efficiency_prefill)
    loo_err = None
    if loo and len(points) >= 3:
        errs = []
        for i, p in enumerate(points):
            rest = [q for j, q in enumerate(points) if j != i]
            e2, t2, p2 = _grid_fit(rest, ep if efficiency_prefill is None else efficiency_prefill)
            errs.append(abs(math.expm1(float(log_errors([p], e2, t2, p2)[0]))))
        loo_err = float(np.median(errs))
    return Fit(eff, tf, ep, tuple(p.id for p in points), _median_abs(points, eff, tf, ep), loo_err)


@dataclass(frozen=True)
class Calibration:
    """The global fit, the per-family fits, and the points each used."""

    global_fit: Fit
    families: dict[str, Fit]
    points: tuple[Point, ...]

    def params_for(self, family: str) -> tuple[float, float, float]:
        f = self.families.get(family, self.global_fit)
        return f.efficiency, f.t_fixed, self.global_fit.efficiency_prefill

    def errors(self) -> dict[str, float]:
        """Relative error |model/measured - 1| of the calibrated model at every fitted point."""
        out = {}
        for p in self.points:
            if p.fit:
                out[p.id] = abs(math.expm1(float(log_errors([p], *self.params_for(p.family))[0])))
        return out


def calibrate(points: Iterable[Point]) -> Calibration:
    """Global fit (all three parameters) then per-family (efficiency, t_fixed) where data allow."""
    pts = tuple(points)
    usable = [p for p in pts if p.fit]
    glob = fit_points(usable)
    fams: dict[str, Fit] = {}
    for fam in sorted({p.family for p in usable}):
        members = [p for p in usable if p.family == fam]
        if len(members) >= MIN_FAMILY_POINTS:
            fams[fam] = fit_points(members, efficiency_prefill=glob.efficiency_prefill)
    return Calibration(glob, fams, pts)


_NAMES = {"trtllm": "TensorRT-LLM (incl. NIM and MLPerf submissions built on it)", "vllm": "vLLM",
          "sglang": "SGLang", "other": "other engines"}


def engines_catalog(cal: Calibration, data_label: str = "tests/data/throughput_points.yaml") -> dict:
    """The ``formulas/catalogs/engines.yaml`` document for a calibration (plain data)."""
    g = cal.global_fit

    def entry(name: str, f: Fit, how: str) -> dict:
        src = (f"fit on {data_label}: ids {', '.join(f.ids)} ({how}; median |error| "
               f"{f.median_abs_error:.1%}" + (f", leave-one-out {f.loo_median_abs_error:.1%}"
                                              if f.loo_median_abs_error is not None else "") + ")")
        return {"name": name,
                "efficiency": {"value": round(f.efficiency, 4), "source": src},
                "t_fixed": {"value": round(f.t_fixed * 1000, 3), "source": src},
                "efficiency_prefill": {"value": round(g.efficiency_prefill, 4), "source": src}}

    entries = {"default": entry("any engine (global fit)", g, "global fit over all engines")}
    for fam in sorted({p.family for p in cal.points if p.fit}):
        if fam in cal.families:
            entries[fam] = entry(_NAMES.get(fam, fam), cal.families[fam], f"fit on the {fam} points")
        else:
            e = entry(_NAMES.get(fam, fam), g, f"too few {fam} points for its own fit: global values")
            entries[fam] = e
    return {
        "catalog": "engines",
        "doc": ("Serving-engine constants of the decode-step model t_step = max(memory_time, compute_time)"
                " / efficiency + t_fixed, fitted by engine.concur.analysis.calibration (least absolute log error)."),
        "fields": {
            "efficiency": {"doc": "fraction of the memory/compute roofline a decode step reaches"},
            "t_fixed": {"unit": "ms", "doc": "fixed cost per decode step (launch, scheduling, sampling)"},
            "efficiency_prefill": {"doc": "fraction of peak FLOP/s a prefill reaches"},
        },
        "entries": entries,
    }


def write_engines_catalog(cal: Calibration, path: str | Path, **kw: Any) -> None:
    """Write :func:`engines_catalog` to ``path`` atomically (a temp file then rename)."""
    import io
    import os

    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 100
    buf = io.StringIO()
    buf.write("# Generated by `python -m concur.analysis.calibration`; edit the data or the physics, not this file.\n")
    yaml.dump(engines_catalog(cal, **kw), buf)
    path = Path(path)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)


def _main(argv: Sequence[str] | None = None) -> int:
    """``python -m concur.analysis.calibration POINTS.yaml [ENGINES.yaml]``: print the fit, optionally write it."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write("usage: python -m concur.analysis.calibration POINTS.yaml [ENGINES.yaml]\n")
        return 2
    cal = calibrate(load_points(args[0]))
    g = cal.global_fit
    sys.stdout.write(f"global: efficiency {g.efficiency:.3f}  t_fixed {g.t_fixed * 1e3:.2f} ms  "
                     f"efficiency_prefill {g.efficiency_prefill:.3f}  median |err| {g.median_abs_error:.1%}  "
                     f"LOO {g.loo_median_abs_error:.1%}\n")
    for fam, f in cal.families.items():
        sys.stdout.write(f"{fam}: efficiency {f.efficiency:.3f}  t_fixed {f.t_fixed * 1e3:.2f} ms  "
                         f"median |err| {f.median_abs_error:.1%}  LOO {f.loo_median_abs_error:.1%}\n")
    errs = cal.errors()
    for p in cal.points:
        b = evaluate(p)
        ratio = (p.measured_per_user / b["bound_per_user"]) if p.measured_per_user else (
            p.measured_per_gpu / b["bound_per_gpu"])
        err = f"{errs[p.id]:6.1%}" if p.id in errs else "  (not fitted)"
        sys.stdout.write(f"{p.id:48s} measured/bound {ratio:5.3f}  calibrated error {err}\n")
    if len(args) > 1:
        write_engines_catalog(cal, args[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
