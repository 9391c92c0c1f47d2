"""Fit an engine's constants on the user's own benchmark results (``concur calibrate --from``).

How is this designed, and why?
------------------------------
A user who has run ``vllm bench serve --save-result``, SGLang's ``bench_serving`` or
genai-perf/AIPerf against their own server already holds better evidence for *their*
deployment than any published table. Each result file (or JSONL line) is one run at one load;
:func:`read_runs` reads it into a :class:`Run` -- concurrency, mean input and output lengths,
mean TPOT, output throughput and, where recorded, mean TTFT -- naming the file and the field
when something is missing. The configuration (model, GPU, tensor parallelism, dtypes) is not
in the files and comes from ``--set``.

**The fit.** Each run becomes a point of :mod:`concur.analysis.calibration`: the pack solves
its roofline terms for the given configuration, and the run's TPOT (per-user rate ``1000 /
TPOT``, the pack's ``t_step_served``) and output throughput (``served_tokens_per_s``) are the
measurements. ``efficiency`` and ``t_fixed`` (per step, for this model) are fitted by least
absolute log error over both. ``efficiency_prefill`` comes from the TTFT of the run with the
longest prompts per request in flight when the files record it (the pack's TTFT under load -- half a step, the
prefill queue, the prompt's chunks -- inverted with the decode constants of a first fit, which
are then refitted with it held); without TTFT it is fitted with the rest, and then only the served throughput pins it down -- weakly when
prompts are short, which the JSON output's error says.

Worked example: five files at concurrency 1..64 of Llama-3.1-8B bf16 on one H100, made by the
pack with efficiency 0.7 and t_fixed 3 ms, give back 0.70 and 3.0 ms (``tests/analysis/test_bench_import.py``).

**Honesty.** A run's TPOT and throughput are one number, so k distinct loads determine at
most k constants: with fewer than the constants fitted plus one the fit refuses (exit 2,
naming the loads it needs), as it does when the loads cannot tell two constants apart
(:func:`concur.analysis.calibration.unidentified`); and beside the in-sample error it reports
the error on loads left out of the fit (leave one load out, or 10 folds of loads beyond 10).

**Cost.** The pack's terms come from one vectorised sweep over the distinct loads
(:func:`concur.analysis.calibration.load_terms`) and the search runs coarse to fine on growing
samples (:func:`concur.analysis.calibration.fast_fit`): 10,000 runs take about 3 s of CPU.

**Non-goals.** Disaggregated prefill/decode, several replicas behind one endpoint (divide the
throughput yourself), speculative decoding, per-request files (``--save-detailed`` arrays are
ignored).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConcurError, UsageError
from ..lang.model import build_model
from ..readfile import FileRefused, read_regular
from ..solver.question import solve_model
from .calibration import (
    FITTED,
    Point,
    cross_validated_error,
    distinct_loads,
    fast_fit,
    load_terms,
    median,
    point_from,
    point_log_errors,
    unidentified,
)

__all__ = ["ENGINE_OVERLAP", "MAX_RUNS", "CalibrationResult", "Run", "catalog_document", "fit_runs", "read_runs"]

ENGINE_OVERLAP = {"vllm": 1.0, "sglang": 0.0, "trt": 1.0, "tensorrt": 1.0}
"""prefill_overlap by the engine a result file names in its ``backend`` field (see engines.yaml)."""
_MAX_BYTES = 64 * 1024 * 1024
MAX_RUNS = 10_000
"""Runs one ``concur calibrate --from`` reads in all (a benchmark sweep is tens of runs)."""
_MAX_DIGITS = 30  # an integer field longer than this is no measurement (and 4,300 digits would not even parse)


@dataclass(frozen=True)
class Run:
    """One benchmark run: load, mean lengths (tokens per request) and what was measured."""

    label: str  # "file" or "file:line"
    fmt: str  # "vllm", "sglang", "genai-perf"
    concurrency: float
    input_tokens: float
    output_tokens: float
    tpot_ms: float
    output_throughput: float  # output tok/s of the whole endpoint
    ttft_ms: float | None
    backend: str


def _shown(value: Any) -> str:
    """``repr(value)``, cut to 60 characters: an error quotes a value, never a 5 MB one."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:45]}...{text[-12:]} ({len(text):,} characters)"


class _TooLong(ValueError):
    pass


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise _TooLong(f"an integer of {len(text):,} digits (at most {_MAX_DIGITS})")
    return int(text)


def _loads(text: str, label: str) -> Any:
    """JSON ``text``; a :class:`UsageError` naming ``label`` for an integer of more than 30 digits or
    nesting past Python's recursion limit (never a traceback); ``json.JSONDecodeError`` for non-JSON."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except _TooLong as exc:
        raise _fail(label, f"holds {exc}") from None
    except RecursionError:
        raise _fail(label, "is nested too deeply to be a benchmark result") from None


def _fail(label: str, what: str) -> UsageError:
    return UsageError(
        f"{label}: {what}",
        hint="give vllm bench serve --save-result JSON, SGLang bench_serving "
        "JSONL or a genai-perf/AIPerf profile_export JSON",
    )


def _num(obj: Mapping[str, Any], key: str, label: str, *, positive: bool = True) -> float:
    if key not in obj or obj[key] is None:
        raise _fail(label, f"missing field '{key}'")
    value = obj[key]
    if isinstance(value, dict) and "avg" in value:  # genai-perf / AIPerf statistics
        value = value["avg"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(label, f"field '{key}' is not a number: {_shown(value)}")
    if positive and value <= 0:
        raise _fail(label, f"field '{key}' must be positive, got {_shown(value)}")
    return float(value)


def _opt(obj: Mapping[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, dict):
        value = value.get("avg")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)
    return None


def _serve_run(obj: Mapping[str, Any], label: str, fmt: str) -> Run:
    """vLLM ``--save-result`` JSON or one SGLang ``bench_serving`` line (the same field names)."""
    completed = _num(obj, "completed", label)
    tpot = _opt(obj, "mean_tpot_ms") or _opt(obj, "median_tpot_ms")
    if tpot is None:
        raise _fail(label, "missing field 'mean_tpot_ms' (or 'median_tpot_ms')")
    output = _num(obj, "output_throughput", label)
    concurrency = _opt(obj, "max_concurrency")
    if concurrency is None:  # an open-loop run: Little's law on the measured latency
        e2e = _opt(obj, "mean_e2el_ms") or _opt(obj, "mean_e2e_latency_ms")
        rate = _opt(obj, "request_throughput")
        if e2e is None or rate is None:
            raise _fail(
                label,
                "missing field 'max_concurrency' (or 'request_throughput' and 'mean_e2el_ms' for an open-loop run)",
            )
        concurrency = rate * e2e / 1000.0
    return Run(
        label,
        fmt,
        concurrency,
        _num(obj, "total_input_tokens", label) / completed,
        _num(obj, "total_output_tokens", label) / completed,
        tpot,
        output,
        _opt(obj, "mean_ttft_ms"),
        str(obj.get("backend", "")),
    )


def _perf_run(obj: Mapping[str, Any], label: str) -> Run:
    """genai-perf ``profile_export_genai_perf.json`` or AIPerf ``profile_export_aiperf.json``."""
    config = obj.get("input_config") or {}
    loadgen = config.get("loadgen") if isinstance(config, dict) else None
    concurrency = None
    for source in (loadgen if isinstance(loadgen, dict) else {}, config if isinstance(config, dict) else {}):
        concurrency = concurrency or _opt(source, "concurrency")
    if concurrency is None:
        raise _fail(
            label,
            "missing field 'input_config.loadgen.concurrency' (AIPerf) or "
            "'input_config.concurrency' (genai-perf): a closed-loop run is needed",
        )
    endpoint = config.get("endpoint") if isinstance(config, dict) else None
    backend = str((endpoint or {}).get("type", "")) if isinstance(endpoint, dict) else ""
    return Run(
        label,
        "genai-perf",
        concurrency,
        _num(obj, "input_sequence_length", label),
        _num(obj, "output_sequence_length", label),
        _num(obj, "inter_token_latency", label),
        _num(obj, "output_token_throughput", label),
        _opt(obj, "time_to_first_token"),
        backend,
    )


def _run(obj: Any, label: str) -> Run:
    if not isinstance(obj, dict):
        raise _fail(label, "not a JSON object")
    if "inter_token_latency" in obj or "output_token_throughput" in obj:
        return _perf_run(obj, label)
    fmt = "sglang" if "total_output_tokens_retokenized" in obj or "mean_e2e_latency_ms" in obj else "vllm"
    return _serve_run(obj, label, fmt)


def read_runs(path: str | Path) -> list[Run]:
    """The runs in one result file: a JSON object (vLLM, genai-perf, AIPerf) or JSON lines (SGLang).

    Raises :class:`UsageError` (exit 2) naming the file, the line and the missing field.
    """
    label = str(path)
    try:
        raw = read_regular(Path(path), _MAX_BYTES)
    except FileRefused as exc:
        raise UsageError(f"{label}: {exc}") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        return [_run(_loads(text, label), label)]
    except json.JSONDecodeError:
        pass
    runs: list[Run] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(runs) == MAX_RUNS:
            raise _fail(label, f"holds more than {MAX_RUNS:,} runs, the most one calibration reads")
        try:
            obj = _loads(line, f"{label}:{n}")
        except json.JSONDecodeError:
            raise _fail(label, f"line {n} is not JSON") from None
        runs.append(_run(obj, f"{label}:{n}"))
    if not runs:
        raise _fail(label, "empty")
    return runs


@dataclass(frozen=True)
class CalibrationResult:
    """What ``--from`` fitted: per-step ``t_fixed`` in seconds, the runs, the in-sample median error
    and the cross-validated one (each load predicted by a fit that did not see it)."""

    efficiency: float
    t_fixed: float
    efficiency_prefill: float
    prefill_overlap: float
    runs: tuple[Run, ...]
    median_abs_error: float
    prefill_from: str  # "TTFT of <run>" or "fitted"
    loo_median_abs_error: float = math.nan
    loo: str = ""  # how the loads were left out

    def to_json(self) -> dict[str, Any]:
        return {
            "efficiency": round(self.efficiency, 4),
            "t_fixed": {"value": round(self.t_fixed * 1e3, 4), "unit": "ms"},
            "efficiency_prefill": round(self.efficiency_prefill, 4),
            "points": len(self.runs),
            "median_abs_error": round(self.median_abs_error, 4),
            "loo_median_abs_error": round(self.loo_median_abs_error, 4),
            "loo": self.loo,
        }


def _overlap(runs: Sequence[Run], given: Mapping[str, Any]) -> float:
    if "prefill_overlap" in given:
        return float(given["prefill_overlap"])
    for run in runs:
        for word, value in ENGINE_OVERLAP.items():
            if word in run.backend.lower():
                return value
    return 0.0


def _points(runs: Sequence[Run], config: Mapping[str, Any], overlap: float) -> list[tuple[Point, Point]]:
    """Per run, one point measured by its per-user rate (TPOT) and one by its per-GPU throughput.

    The pack's terms come from one vectorised sweep over the runs' distinct loads."""
    gpus = int(config.get("tp", 1)) * int(config.get("pp", 1))
    terms = load_terms(config, [(r.concurrency, r.input_tokens, r.output_tokens) for r in runs])
    out = []
    for run, term in zip(runs, terms, strict=True):
        user = point_from(
            run.label,
            config,
            engine="user",
            concurrency=run.concurrency,
            input_tokens=run.input_tokens,
            output_tokens=run.output_tokens,
            prefill_overlap=overlap,
            source_group=run.label,
            measured_per_gpu=None,
            measured_per_user=1000.0 / run.tpot_ms,
            terms=term,
        )
        out.append((user, replace(user, measured_per_user=None, measured_per_gpu=run.output_throughput / gpus)))
    return out


def _loads_text(runs: Sequence[Run]) -> str:
    loads = sorted({(r.concurrency, r.input_tokens, r.output_tokens) for r in runs})
    shown = ", ".join(f"{c:g}@{i:g}/{o:g}" for c, i, o in loads[:6])
    return shown + (f" and {len(loads) - 6} more" if len(loads) > 6 else "")


def _prefill_from_ttft(
    run: Run, config: Mapping[str, Any], overlap: float, efficiency: float, t_fixed: float
) -> float | None:
    """The efficiency_prefill whose pack ``ttft`` (half a step, the prefill queue, the prompt's
    chunks) at the run's load equals its measured TTFT, with the decode constants of a first fit;
    bisection in log space (ttft falls as it grows). None when no value in [0.05, 1] does."""
    model = build_model(["llm_throughput"])
    given = {
        **config,
        "efficiency": efficiency,
        "t_fixed": f"{t_fixed!r} s",
        "prefill_overlap": overlap,
        "concurrency": f"{run.concurrency!r} request",
        "input_tokens": f"{run.input_tokens!r} token/request",
        "output_tokens": f"{run.output_tokens!r} token/request",
        "kv_fit": "ignore",
    }
    target = float(run.ttft_ms or 0.0) / 1e3

    def ttft_at(eta: float) -> float:
        try:
            return solve_model(model, ("ttft",), {**given, "efficiency_prefill": eta}).value("ttft", "s")
        except ConcurError:
            return math.inf  # the prompts saturate the replica at this efficiency

    lo, hi = 0.05, 1.0
    if not ttft_at(hi) <= target <= ttft_at(lo):
        return None
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ttft_at(mid) > target else (lo, mid)
    return math.sqrt(lo * hi)


def fit_runs(runs: Sequence[Run], given: Mapping[str, Any]) -> CalibrationResult:
    """Fit efficiency, t_fixed and efficiency_prefill on ``runs`` for the configuration ``given``
    (pack givens: ``model``, ``gpu``, ``tp``, dtypes...; ``prefill_overlap`` optional).

    Raises :class:`UsageError` (exit 2) when the runs cannot identify what is fitted: fewer
    than two concurrencies, fewer distinct loads (concurrency, input and output lengths) than
    the constants fitted plus one -- a run's TPOT and throughput are one number, so k loads
    determine at most k constants and one more is needed to see an error -- or loads whose
    sensitivities cannot tell two constants apart (:func:`unidentified`). Reports the
    in-sample error and the cross-validated one (:func:`cross_validated_error`).
    """
    concurrencies = sorted({r.concurrency for r in runs})
    if len(runs) < 2 or len({round(c, 6) for c in concurrencies}) < 2:
        raise UsageError(
            f"a fit needs runs at two or more concurrencies, got {len(runs)} run(s) at {concurrencies[:6]}",
            hint="benchmark with --max-concurrency 1, 8, 32 ...",
        )
    config = {k: v for k, v in given.items() if k != "prefill_overlap"}
    overlap = _overlap(runs, given)
    timed_runs = [r for r in runs if r.ttft_ms is not None and r.ttft_ms > r.tpot_ms]
    fitted = FITTED[:2] if timed_runs else FITTED
    loads = {(round(r.concurrency, 6), round(r.input_tokens, 3), round(r.output_tokens, 3)) for r in runs}
    if len(loads) < len(fitted) + 1:
        raise UsageError(
            f"{len(fitted)} constants ({', '.join(fitted)}) need runs at {len(fitted) + 1} or more distinct loads "
            f"(concurrency and mean input/output lengths), got {len(loads)}: {_loads_text(runs)}; "
            "a run's TPOT and throughput are one number, so fewer loads fit any constants exactly and "
            "prove nothing",
            hint="add runs at other concurrencies (e.g. --max-concurrency 1, 4, 16, 64) or prompt/output lengths"
            + ("" if timed_runs else ", or results with mean_ttft_ms (which fixes efficiency_prefill)"),
        )
    pairs = _points(runs, config, overlap)
    flat = [p for pair in pairs for p in pair]
    eta_p = None
    prefill_from = "fitted with the rest (no TTFT in the files)"
    timed = [r for r in runs if r.ttft_ms is not None]
    eff, tf, ep = fast_fit(flat, None)
    if timed:
        # the run whose TTFT the prompt's compute dominates most: long prompts at light load
        run = max(timed, key=lambda r: r.input_tokens / r.concurrency)
        for _ in range(3):  # the prefill pins the decode constants' share of the TTFT, and back
            found = _prefill_from_ttft(run, config, overlap, eff, tf)
            if found is None:
                break
            eta_p = found
            eff, tf, ep = fast_fit(flat, eta_p)
        if eta_p is not None:
            prefill_from = f"TTFT of {run.label} (concurrency {run.concurrency:g})"
    blind = unidentified(flat, eta_p, (eff, tf, ep))
    if blind is not None:
        raise UsageError(
            f"the runs cannot identify {blind}: across their {len(distinct_loads(flat))} loads "
            f"({_loads_text(runs)}) its effect on TPOT and throughput is not separable from the other constants'",
            hint="add runs whose loads differ more (concurrency from 1 to where the GPU saturates, short and "
            "long prompts)" + ("" if eta_p is not None else ", or results with mean_ttft_ms"),
        )
    errs = [abs(math.expm1(float(x))) for x in point_log_errors(flat, eff, tf, ep)]
    loo, how = cross_validated_error(flat, eta_p)
    return CalibrationResult(eff, tf, ep, overlap, tuple(runs), median(errs), prefill_from, loo, how)


def catalog_document(result: CalibrationResult, entry_id: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """An engines-catalog document holding one entry for ``result`` (what ``-o`` writes)."""
    config = ", ".join(f"{k}={v}" for k, v in given.items())
    files = ", ".join(sorted({r.label.rsplit(":", 1)[0] if r.fmt == "sglang" else r.label for r in result.runs}))
    src = (
        f"concur calibrate --from on {len(result.runs)} runs ({files}) of {config}; median |error| over their "
        f"TPOT and output throughput {100 * result.median_abs_error:.1f}% in-sample, "
        f"{100 * result.loo_median_abs_error:.1f}% cross-validated ({result.loo})"
    )
    return {
        "catalog": "engines",
        "doc": "Engine constants calibrated on the user's own benchmark results (concur calibrate --from).",
        "fields": {
            "efficiency": {"doc": "fraction of the roofline a decode step reaches"},
            "t_fixed": {"unit": "ms", "doc": "fixed cost per decode step of the calibrated model"},
            "efficiency_prefill": {"doc": "fraction of peak_flops x flops_fraction a prefill reaches"},
            "prefill_overlap": {"doc": "1 when the engine runs prefill chunks inside decode steps, else 0"},
        },
        "entries": {
            entry_id: {
                "name": f"calibrated: {config}",
                "efficiency": {"value": round(result.efficiency, 4), "source": src},
                "t_fixed": {"value": round(result.t_fixed * 1e3, 4), "source": src},
                "efficiency_prefill": {
                    "value": round(result.efficiency_prefill, 4),
                    "source": f"{src}; from the {result.prefill_from}",
                },
                "prefill_overlap": {
                    "value": int(result.prefill_overlap),
                    "source": (
                        "given"
                        if "prefill_overlap" in given
                        else "from the result files' backend field (vllm, trt: 1; sglang or unnamed: 0)"
                    ),
                },
            }
        },
    }
