"""``formulas/catalogs/engines.yaml`` from a calibration, the error report, and the fit plot.

``python -m concur.analysis.engine_catalog POINTS.yaml [ENGINES.yaml] [--plot PNG]`` (also
``concur calibrate --report``) loads the points, fits every level
(:func:`concur.analysis.engine_fits.fit_set`), cross-validates leaving one source group out
(:func:`concur.analysis.engine_fits.cross_validate`), prints the per-cell table and, given a
path, writes the catalog -- every constant with the points it was fitted on and its in-sample
and leave-one-source-out error in its source text, so ``concur solve --explain`` can be traced
back to the evidence. The catalog is written to a temporary file and renamed.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..lang.versions import release, release_key
from ..lang.yamlsafe import load_yaml
from ..writefile import output_path, write_output
from .attention_kernels import ATTENTION_KERNELS_LABEL, MLA_FAMILIES, MlaPrefillFit, fit_mla_prefill
from .calibration import Point, load_points, median
from .engine_fits import (
    ENGINES,
    FAMILIES,
    MIN_POINTS,
    CrossValidation,
    FitSet,
    Level,
    PrefillFit,
    cross_validate,
    fit_prefill,
    fit_set,
)
from .moe_kernels import FP8_FAMILIES, MOE_KERNELS_LABEL, MoeGemmFit, fit_moe_gemm

__all__ = [
    "DATA_LABEL",
    "PREFILL_OVERLAP",
    "SCHEDULER_FACTS",
    "engine_versions",
    "engines_catalog",
    "main",
    "plot_fit",
    "report",
    "write_atomically",
    "write_catalog",
    "yaml_text",
]

DATA_LABEL = "tests/data/throughput_points.yaml"
_NAMES = {
    "default": "any engine (engine-agnostic fits per GPU family)",
    "sglang": "SGLang",
    "trtllm": "TensorRT-LLM (incl. NIM and MLPerf submissions built on it)",
    "vllm": "vLLM",
}
PREFILL_OVERLAP: dict[str, tuple[int, str]] = {
    "vllm": (
        1,
        "vLLM V1 (the default engine since v0.8.0, release notes 'V1 engine is enabled by default') always "
        "schedules with chunked prefill: a step carries the running decodes plus prefill chunks up to "
        "max_num_batched_tokens (docs.vllm.ai, 'Optimization and Tuning', chunked prefill)",
    ),
    "trtllm": (
        1,
        "TensorRT-LLM in-flight batching runs requests in the context phase and in the generation "
        "phase in the same iteration (NVIDIA/TensorRT-LLM docs/source/advanced/gpt-attention.md, "
        "'In-flight batching'); chunked context splits long prompts (enable_chunked_context)",
    ),
    "sglang": (
        0,
        "SGLang runs prefill batches and decode batches as separate forward passes unless "
        "--enable-mixed-chunk is set; its default is False (sgl-project/sglang "
        "python/sglang/srt/server_args.py, enable_mixed_chunk: bool = False)",
    ),
    "default": (0, "engine unknown: no prefill is assumed to hide under decode steps (the slower, safe side)"),
}
KV_RESERVE: dict[str, tuple[int, str]] = {
    "vllm": (
        0,
        "vLLM V1 takes KV blocks as a step computes tokens and, when a running request cannot get one, "
        "preempts the newest running request and recomputes it later (vllm-project/vllm "
        "vllm/v1/core/sched/scheduler.py, Scheduler.schedule: allocate_slots fails -> preempt the "
        "lowest-priority running request; docs.vllm.ai 'Optimization and Tuning', Preemption)",
    ),
    "trtllm": (
        1,
        "TensorRT-LLM's default capacity scheduler policy GUARANTEED_NO_EVICT admits a request only when "
        "the KV blocks of its whole context (prompt and maximum output) are free, so it never evicts "
        "(NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py, SchedulerConfig.capacity_scheduler_policy "
        "default CapacitySchedulerPolicy.GUARANTEED_NO_EVICT)",
    ),
    "sglang": (
        1,
        "SGLang admits a request against its prompt plus a share of its maximum output (new_token_ratio, "
        "decaying) and retracts requests when memory runs out; reserving the whole context is the "
        "conservative end of that policy (sgl-project/sglang python/sglang/srt/managers/schedule_policy.py, "
        "PrefillAdder)",
    ),
    "default": (0, "engine unknown: blocks taken on demand, preemption by recomputation (vLLM's policy)"),
}
PREFIX_CACHING: dict[str, tuple[int, str]] = {
    "vllm": (
        1,
        "vLLM V1 caches full KV blocks by their content hash by default (automatic prefix caching; "
        "vllm-project/vllm vllm/engine/arg_utils.py, enable_prefix_caching defaults to True for the V1 "
        "engine); a preempted request's blocks are freed in reverse order 'so that the tail blocks are "
        "evicted first' (vllm/v1/core/kv_cache_manager.py, KVCacheManager.free) and found again when it "
        "is rescheduled",
    ),
    "trtllm": (
        1,
        "TensorRT-LLM reuses KV blocks across requests by default (tensorrt_llm/llmapi/llm_args.py, "
        "KvCacheConfig.enable_block_reuse default True)",
    ),
    "sglang": (
        1,
        "SGLang keeps finished requests' KV in its radix tree unless --disable-radix-cache "
        "(sgl-project/sglang python/sglang/srt/server_args.py, disable_radix_cache: bool = False)",
    ),
    "default": (0, "engine unknown: a preempted request recomputes everything (the slower, safe side)"),
}
PREFILL_LABEL = "tests/data/prefill_points.yaml"
TOKEN_BUDGET: dict[str, tuple[int, str]] = {
    "vllm": (
        8192,
        "vLLM `vllm serve` default max_num_batched_tokens on GPUs of at least 70 GiB other than A100 "
        "(vllm-project/vllm vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: "
        "UsageContext.OPENAI_API_SERVER: 8192; 2048 on smaller GPUs and A100)",
    ),
    "trtllm": (
        8192,
        "TensorRT-LLM default max_num_tokens 8192 (NVIDIA/TensorRT-LLM tensorrt_llm/builder.py BuildConfig.max_num_tokens)",
    ),
    "sglang": (
        8192,
        "SGLang --chunked-prefill-size, 8192 on 80 GB-class GPUs (sgl-project/sglang python/sglang/srt/server_args.py, "
        "chunked_prefill_size chosen by GPU memory)",
    ),
    "default": (
        8192,
        "engine unknown: the 8192-token step budget vLLM, SGLang and TensorRT-LLM default to on 80 GB GPUs",
    ),
}


def _pct(x: float) -> str:
    import math

    return "n/a" if math.isnan(x) else f"{100 * x:.1f}%"


def _cell_cv(cv: CrossValidation, points: Sequence[Point], engine: str, family: str | None) -> tuple[float, int]:
    """Leave-one-source-out median over the points an entry's constants describe (all engines for default)."""
    ids = [
        p.id
        for p in points
        if p.fit and (engine == "default" or p.engine == engine) and (family is None or p.gpu_family == family)
    ]
    return cv.median(ids, engine=engine != "default"), len(ids)


def _describe(
    fs: FitSet, cv: CrossValidation, points: Sequence[Point], engine: str, family: str, data_label: str
) -> tuple[Level, str]:
    """The level an entry's constant for ``family`` comes from, and the source text saying so."""
    fam = None if family == "other" else family
    if fam is not None and f"{engine}@{fam}" in fs.cells:
        lv = fs.cells[f"{engine}@{fam}"]
        err, n = _cell_cv(cv, points, engine, fam)
        return lv, (
            f"{engine}@{fam}: fit on {len(lv.ids)} points of {data_label} (ids {', '.join(lv.ids)}), pulled "
            f"towards the {'global' if engine == 'default' else engine} fit; in-sample median |error| "
            f"{_pct(lv.in_sample)}, leave-one-source-out {_pct(err)} over its {n} points"
        )
    wide = fs.engines.get(engine) if engine != "default" else None
    lv = wide or fs.glob
    err, n = _cell_cv(cv, points, engine if wide else "default", None)
    what = f"{engine} over all GPUs" if wide else "the global fit over every engine and GPU"
    where = f"{engine}.efficiency_other" if wide else "default.efficiency_other"
    reason = ""
    if fam is not None:
        who = "" if engine == "default" else f"{engine} "
        have = sum(1 for p in points if p.fit and p.gpu_family == fam and engine in ("default", p.engine))
        reason = f"{have} {who}points on {fam} GPUs (fewer than {MIN_POINTS}): "
    ids = f"ids {', '.join(lv.ids)}" if family == "other" else f"ids listed under {where}"
    return lv, (
        f"{engine}@{family}: {reason}{what}, fit on {len(lv.ids)} points of {data_label} ({ids}); in-sample "
        f"median |error| {_pct(lv.in_sample)}, leave-one-source-out {_pct(err)} over its {n} points"
    )


SCHEDULER_FACTS = {
    "prefill_overlap": PREFILL_OVERLAP,
    "token_budget": TOKEN_BUDGET,
    "kv_reserve": KV_RESERVE,
    "prefix_caching": PREFIX_CACHING,
}


def _scheduler_facts(engine: str) -> dict[str, Any]:
    """The engine's scheduler settings (not fitted): each value with the engine source that states it."""
    return {name: {"value": table[engine][0], "source": table[engine][1]} for name, table in SCHEDULER_FACTS.items()}


_KERNEL_ROWS = (
    "at prefill sizes (8,192 and 16,384 tokens; H100, H200, B200; DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B "
    f"and Mixtral-8x7B expert shapes; FP8 with block scales and BF16) in {MOE_KERNELS_LABEL}"
)


def _moe_gemm_entries(engine: str, moe: MoeGemmFit) -> dict[str, Any]:
    """The engine's MoE kernel constants (concur.analysis.moe_kernels) with the measurements behind them
    (every engine's EP rows for ``default`` or an engine without EP rows of its own)."""
    errors = (
        f"the constants reproduce every row's rate within x{math.exp(moe.error):.2f} (median), "
        f"each model shape predicted from the other three within x{math.exp(moe.loso_error):.2f}"
    )
    whose = engine if engine in moe.ep_rate and engine != "default" else "default"
    every = f"fitted once on {moe.n['tile']} silicon measurements of every engine's MoE op with the experts whole or sliced tensor-parallel on each GPU (TP1, TP8) {_KERNEL_ROWS}"
    return {
        "moe_gemm_tile_depth": {
            "value": moe.tile_depth,
            "source": f"{every}: the depth that best reproduces them with a BF16 grouped GEMM of a given shape at a dense prefill's rate; {errors} (concur.analysis.moe_kernels)",
        },
        **{
            f"moe_gemm_fp8_rate_{fam}": {
                "value": moe.fp8_rate[fam],
                "source": (
                    f"{every}: the median rate over their shape's of the FP8 rows "
                    + (f"on {fam} GPUs" if fam != "other" else "on every GPU (no family of its own measured)")
                    + f"; {errors} (concur.analysis.moe_kernels)"
                ),
            }
            for fam in (*FP8_FAMILIES, "other")
        },
        "moe_gemm_deepep_rate": {
            "value": moe.deepep_rate,
            "source": (
                f"median over {moe.n['deepep']} silicon measurements of SGLang's wide-EP MoE op (DeepEP dispatch "
                "into DeepGEMM grouped GEMMs; DeepSeek-V3 experts, FP8 with block scales, EP8 and EP16, 8,192 "
                f"and 16,384 token-expert pairs a GPU; H100, H200, B200) in {MOE_KERNELS_LABEL} of the measured "
                "rate over the shape's; one value for every engine (concur.analysis.moe_kernels)"
            ),
        },
        "moe_gemm_ep_rate": {
            "value": moe.ep_rate[whose],
            "source": (
                f"median over {moe.n[whose]} silicon measurements of "
                + (f"{engine}'s" if whose == engine else "every engine's")
                + f" MoE op with whole experts per GPU (EP8) {_KERNEL_ROWS} of the measured rate over the "
                f"shape's and format's; {errors} (concur.analysis.moe_kernels)"
            ),
        },
    }


def _mla_prefill_entries(engine: str, mla: MlaPrefillFit) -> dict[str, Any]:
    """The engine's MLA prefill attention rate per GPU family (concur.analysis.attention_kernels) with
    the measurements behind each."""
    errors = (
        f"the rates reproduce every row within x{math.exp(mla.error):.2f} (median), each GPU's rows "
        f"predicted from its family's other GPUs within x{math.exp(mla.held_out):.2f}"
    )
    out: dict[str, Any] = {}
    for fam in MLA_FAMILIES:
        key = (engine if (engine, fam) in mla.rates else "default", fam)
        who = f"{engine}'s" if key[0] == engine else "every engine's"
        source = (
            f"median over {mla.n[key]} silicon measurements of {who} MLA prefill attention kernel "
            f"({', '.join(mla.kernels[key])}) on {fam} GPUs in {ATTENTION_KERNELS_LABEL} (DeepSeek-V3, 16 heads a "
            "GPU, one prompt of 4,096 to 16,384 tokens) of the measured rate over the pack's (BF16 peak x "
            f"flops_fraction x efficiency_prefill); {errors} (concur.analysis.attention_kernels)"
            if key in mla.rates
            else f"no measured MLA prefill kernel on {fam} GPUs in {ATTENTION_KERNELS_LABEL}: the BF16 peak"
        )
        out[f"mla_prefill_rate_{fam}"] = {"value": mla.rate(engine, fam), "source": source}
    return out


def _catalog_fields() -> dict[str, Any]:
    """The engines catalog's field declarations: units and what each constant or setting means."""
    fields: dict[str, Any] = {}
    for fam in (*FAMILIES, "other"):
        fields[f"efficiency_{fam}"] = {"doc": f"decode efficiency (fraction of the roofline) on {fam} GPUs"}
        fields[f"t_layer_{fam}"] = {"unit": "ms", "doc": f"fixed decode-step cost per dense layer on {fam} GPUs"}
    fields["efficiency_prefill"] = {"doc": "fraction of peak_flops x flops_fraction a prefill reaches (per engine)"}
    fields["moe_layer_factor"] = {"doc": "fixed cost of an MoE layer over a dense layer's"}
    fields["moe_gemm_tile_depth"] = {
        "doc": "fixed cost of a grouped GEMM's output tile in steps of its reduction (one value for every engine)"
    }
    for fam in (*FP8_FAMILIES, "other"):
        fields[f"moe_gemm_fp8_rate_{fam}"] = {
            "doc": f"rate of block-scaled FP8 grouped GEMMs over BF16 ones of the same shape on {fam} GPUs (one value for every engine)"
        }
    fields["moe_gemm_ep_rate"] = {
        "doc": "rate of the engine's default expert-parallel MoE op over its op with the experts on every GPU"
    }
    fields["moe_gemm_deepep_rate"] = {
        "doc": "rate of DeepEP-fed DeepGEMM grouped GEMMs over a dense prefill's at the shape (one value for every engine)"
    }
    for fam in MLA_FAMILIES:
        fields[f"mla_prefill_rate_{fam}"] = {
            "doc": f"rate of the engine's MLA prefill attention kernel on {fam} GPUs over the BF16 peak x flops_fraction x efficiency_prefill"
        }
    fields["prefill_overlap"] = {"doc": "1 when the engine runs prefill chunks inside decode steps, else 0"}
    fields["token_budget"] = {"unit": "token", "doc": "tokens one engine step may carry (decodes and prefill chunk)"}
    fields["prefix_caching"] = {
        "doc": "1 when KV blocks stay cached after their request releases them (a preempted request finds its prefix again)"
    }
    fields["kv_reserve"] = {
        "doc": "1 when admission reserves a request's whole KV context (never preempts), 0 when blocks are taken on demand"
    }
    fields["efficiency"] = {"doc": "one efficiency for every GPU (user entries from concur calibrate)"}
    fields["t_fixed"] = {"unit": "ms", "doc": "fixed cost per decode step of the calibrated model (user entries)"}
    fields["version"] = {
        "text": True,
        "doc": "the engine release engine=NAME stands for (engine=NAME@VERSION names another of 'versions')",
    }
    fields["versions"] = {
        "text": True,
        "doc": "releases (major.minor) whose measured runs the constants were fitted on",
    }
    return fields


def engines_catalog(
    fs: FitSet,
    cv: CrossValidation,
    points: Sequence[Point],
    data_label: str = DATA_LABEL,
    prefill: PrefillFit | None = None,
    versions: dict[str, list[str]] | None = None,
    moe: MoeGemmFit | None = None,
    mla: MlaPrefillFit | None = None,
) -> dict[str, Any]:
    """The engines catalog document (plain data) for a calibration and its cross-validation."""
    fields = _catalog_fields()
    moe_src = (
        f"one factor for every engine and GPU, chosen from {', '.join(f'{m:g}' for m in (1, 1.5, 2, 2.5, 3))} "
        f"by the total |log error| over the {sum(p.fit for p in points)} usable points of {data_label}; "
        "leave-one-source-out folds chose " + ", ".join(f"{g} {m:g}" for g, m in cv.moe_factors.items())
    )
    entries: dict[str, Any] = {}
    for engine in ("default", *ENGINES):
        entry: dict[str, Any] = {"name": _NAMES[engine]}
        if versions and versions.get(engine):
            entry["name"] += f"; decode constants from runs of {', '.join(versions[engine])}"
        for fam in (*FAMILIES, "other"):
            lv, src = _describe(fs, cv, points, engine, fam, data_label)
            entry[f"efficiency_{fam}"] = {"value": round(lv.efficiency, 4), "source": src}
            entry[f"t_layer_{fam}"] = {"value": round(lv.t_layer * 1e3, 5), "source": src}
        entry.update(_version_fields(engine, (versions or {}).get(engine, []), data_label))
        if prefill is not None:
            per = ", ".join(f"{k} {v:.3f}" for k, v in prefill.per_point.items())
            entry["efficiency_prefill"] = {
                "value": round(prefill.value, 4),
                "source": (
                    f"median of the values that reproduce the TTFT at concurrency 1 (no queue) of the "
                    f"{len(prefill.per_point)} low-load prefill points of {PREFILL_LABEL} ({per}); one value for "
                    "every engine until each engine has low-load prefill measurements of its own"
                ),
            }
        else:
            wide = fs.engines.get(engine, fs.glob)
            entry["efficiency_prefill"] = {
                "value": round(wide.efficiency_prefill, 4),
                "source": f"fitted with the decode constants on {len(wide.ids)} points of {data_label}",
            }
        entry["moe_layer_factor"] = {"value": fs.moe_factor, "source": moe_src}
        if moe is not None:
            entry.update(_moe_gemm_entries(engine, moe))
        if mla is not None:
            entry.update(_mla_prefill_entries(engine, mla))
        entry.update(_scheduler_facts(engine))
        entries[engine] = entry
    return {
        "catalog": "engines",
        "doc": (
            "Serving-engine constants of the decode step of formulas/llm_throughput.yaml, per GPU family: "
            "t_step = max(memory_time, compute_time / flops_fraction) / efficiency + t_comm + layers x t_layer "
            "(x moe_layer_factor for MoE). Generated by `python -m concur.analysis.engine_catalog "
            f"{data_label} formulas/catalogs/engines.yaml` (concur.analysis.engine_fits): each family's "
            f"constants come from the engine's own points on that family when there are at least {MIN_POINTS}, "
            "else from the engine over all GPUs, else from the global fit; every source names the level, the "
            "points and the in-sample and leave-one-source-out median errors. Edit the data or the physics, "
            "not this file."
        ),
        "fields": fields,
        "entries": entries,
    }


def _version_fields(engine: str, texts: Sequence[str], data_label: str) -> dict[str, Any]:
    """``version`` (the newest release among the fitted points, what ``engine=NAME`` means) and
    ``versions`` (every release of the fitted points) of an engine entry, each citing the texts the
    points state; nothing for an engine none of whose points names a release of its own."""
    by: dict[str, list[str]] = {}
    for text in texts:
        rel = release(text)
        if rel is not None:
            by.setdefault(rel, []).append(text)
    if not by:
        return {}
    ordered = sorted(by, key=release_key)
    seen = "; ".join(f"{rel}: {', '.join(by[rel])}" for rel in ordered)
    unnamed = [t for t in texts if release(t) is None]
    rest = (
        f"; points naming no {engine} release ({', '.join(unnamed)}) are fitted too but name no version"
        if unnamed
        else ""
    )
    return {
        "version": {
            "value": ordered[-1],
            "source": (
                f"the newest {engine} release among the engine_version of the points of {data_label} the "
                f"constants were fitted on ({seen}){rest}; engine={engine} means {engine}@{ordered[-1]}"
            ),
        },
        "versions": {
            "value": ", ".join(ordered),
            "source": f"the releases of the fitted points' engine_version in {data_label} ({seen}){rest}",
        },
    }


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` by :func:`concur.writefile.write_output` (never half a file)."""
    write_output(path, text)


def yaml_text(doc: Any, header: str = "") -> str:
    """``doc`` as block-style YAML, after an optional comment ``header`` line."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 110
    buf = io.StringIO()
    if header:
        buf.write(f"# {header}\n")
    yaml.dump(doc, buf)
    return buf.getvalue()


def write_catalog(doc: dict[str, Any], path: str | Path) -> None:
    """Write ``doc`` as YAML to ``path`` atomically (a temporary file, then rename)."""
    write_atomically(
        path,
        yaml_text(
            doc, "Generated by `python -m concur.analysis.engine_catalog`; edit the data or the physics, not this file."
        ),
    )


def report(fs: FitSet, cv: CrossValidation, points: Sequence[Point], *, per_point: bool = False) -> list[str]:
    """The per-cell error table (markdown) with the overall medians; optionally one line per point."""
    usable = [p for p in points if p.fit]
    lines = [
        f"usable points: {len(usable)} of {len(points)} (the rest have no numeric load or use speculative "
        f"decoding); MoE layer factor {fs.moe_factor:g}",
        f"median |error| of served throughput, leave-one-source-out: with the engine's constants "
        f"{_pct(cv.median())}, without (engine-agnostic family fit) {_pct(cv.median(engine=False))}; "
        f"in-sample with the engine {_pct(median([abs(fs.error(p)) for p in usable]))}",
        "",
        "| cell | points | constants from | efficiency | t_layer | efficiency_prefill | in-sample "
        "| leave-one-source-out |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for engine in ENGINES:
        for fam in FAMILIES:
            members = [p for p in usable if p.engine == engine and p.gpu_family == fam]
            lv = fs.resolve(engine, fam)
            ins = median([abs(fs.error(p)) for p in members])
            out = cv.median([p.id for p in members])
            if not members and lv is fs.glob:
                continue
            lines.append(
                f"| {engine}@{fam} | {len(members)} | {lv.key} | {lv.efficiency:.3f} | "
                f"{lv.t_layer * 1e6:.1f} us | {lv.efficiency_prefill:.3f} | {_pct(ins)} | {_pct(out)} |"
            )
    lines += [
        "",
        "| source group (held out) | points | leave-one-source-out, with engine | without |",
        "| --- | --- | --- | --- |",
    ]
    for group in sorted({p.source_group for p in usable}):
        ids = [p.id for p in usable if p.source_group == group]
        lines.append(f"| {group} | {len(ids)} | {_pct(cv.median(ids))} | {_pct(cv.median(ids, engine=False))} |")
    if per_point:
        lines += ["", "| point | cell | in-sample | leave-one-source-out (level used) |", "| --- | --- | --- | --- |"]
        for p in usable:
            lines.append(f"| {p.id} | {p.cell} | {fs.error(p):+.1%} | {cv.with_engine[p.id]:+.1%} ({cv.level[p.id]}) |")
    return lines


def plot_fit(fs: FitSet, cv: CrossValidation, points: Sequence[Point], path: str | Path) -> None:
    """Modelled vs measured served throughput, in-sample and held out, log-log with ±20 % bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    usable = [p for p in points if p.fit]
    measured = [
        float(p.measured_per_gpu if p.measured_per_gpu is not None else p.measured_per_user or 0.0) for p in usable
    ]
    fig, ax = plt.subplots(figsize=(7.0, 6.2), dpi=110)
    colours = {"vllm": "tab:blue", "sglang": "tab:orange", "trtllm": "tab:green"}
    for label, errs, marker, fill in (
        ("in-sample", {p.id: fs.error(p) for p in usable}, "o", True),
        ("leave-one-source-out", cv.with_engine, "s", False),
    ):
        for eng, colour in colours.items():
            xs = [m for p, m in zip(usable, measured) if p.engine == eng]
            ys = [m * (1 + errs[p.id]) for p, m in zip(usable, measured) if p.engine == eng]
            ax.scatter(
                xs,
                ys,
                marker=marker,
                s=30,
                facecolors=colour if fill else "none",
                edgecolors=colour,
                label=f"{eng}, {label}",
            )
    lo, hi = min(measured) / 1.6, max(measured) * 1.6
    ax.plot([lo, hi], [lo, hi], "k-", lw=1)
    for f in (0.8, 1.2):
        ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (tok/s per GPU, or per user where only that is published)")
    ax.set_ylabel("modelled (llm_throughput, engine's constants)")
    ax.set_title(
        f"served throughput: median |error| {_pct(median([abs(fs.error(p)) for p in usable]))} in-sample, "
        f"{_pct(cv.median())} held out",
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    try:
        with output_path(path, ".png") as tmp:
            fig.savefig(tmp)
    finally:
        plt.close(fig)


def engine_versions(path: str | Path, points: Sequence[Point]) -> dict[str, list[str]]:
    """Per engine id, the published engine versions of its usable points (as the sources state them),
    so that a preset says which engine builds its constants describe."""
    raw = {str(r["id"]): str(r.get("engine_version", "")).strip() for r in load_yaml(path)["points"]}
    out: dict[str, set[str]] = {}
    for p in points:
        text = raw.get(p.id, "")
        if p.fit and text and not text.lower().startswith("not stated"):
            out.setdefault(p.engine, set()).add(text)
    return {engine: sorted(texts) for engine, texts in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m concur.analysis.engine_catalog POINTS.yaml [ENGINES.yaml] [--plot PNG] [--points]``."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    plot = None
    if "--plot" in args:
        i = args.index("--plot")
        if i + 1 >= len(args):
            sys.stderr.write("error: --plot needs a PNG path\n")
            return 2
        plot = args[i + 1]
        del args[i : i + 2]
    per_point = "--points" in args
    args = [a for a in args if a != "--points"]
    if not args or len(args) > 2:
        sys.stderr.write(
            "usage: python -m concur.analysis.engine_catalog POINTS.yaml [ENGINES.yaml] [--plot PNG] [--points]\n"
        )
        return 2
    points = load_points(args[0])
    versions = engine_versions(args[0], points)
    prefill = fit_prefill(PREFILL_LABEL)
    fs = fit_set(points, efficiency_prefill=prefill.value)
    cv = cross_validate(points, efficiency_prefill=prefill.value)
    sys.stdout.write("\n".join(report(fs, cv, points, per_point=per_point)) + "\n")
    if len(args) > 1:
        moe = fit_moe_gemm(MOE_KERNELS_LABEL, prefill.value)
        mla = fit_mla_prefill(ATTENTION_KERNELS_LABEL, prefill.value)
        doc = engines_catalog(fs, cv, points, prefill=prefill, versions=versions, moe=moe, mla=mla)
        write_catalog(doc, args[1])
        sys.stdout.write(f"wrote {args[1]}\n")
    if plot:
        plot_fit(fs, cv, points, plot)
        sys.stdout.write(f"wrote {plot}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
