"""What an engine simulation reports: percentiles, the per-step record, the result, SLA checks.

Kept apart from the event loop (:mod:`concur.analysis.enginesim`) so that presenters -- ``concur
simulate``, ``concur plan --verify`` -- read results without the scheduler. Times are seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

__all__ = ["SLO_NAMES", "DisaggStats", "EngineSimResult", "Percentiles", "StepRecord", "seconds_text", "sla_misses"]


@dataclass(frozen=True)
class Percentiles:
    """Mean and 50th/90th/99th percentiles (linear interpolation), seconds; ``nan`` when empty."""

    mean: float
    p50: float
    p90: float
    p99: float

    @staticmethod
    def of(values: Any, weights: Any = None) -> Percentiles:
        """Of ``values``, each counted ``weights`` times (whole numbers; 1 when None): the same numbers
        as ``numpy.percentile`` (linear) and the mean of the values repeated.

        >>> Percentiles.of([1.0, 2.0, 3.0, 4.0]).p50
        2.5
        >>> Percentiles.of([1.0, 4.0], weights=[3, 1]).p50
        1.0
        """
        import numpy as np

        arr = np.asarray(values, dtype=float)
        if arr.size == 0:
            return Percentiles(math.nan, math.nan, math.nan, math.nan)
        if weights is None:
            p50, p90, p99 = np.percentile(arr, [50, 90, 99])
            return Percentiles(float(arr.mean()), float(p50), float(p90), float(p99))
        w = np.asarray(weights, dtype=float)
        order = np.argsort(arr, kind="stable")
        arr, w = arr[order], w[order]
        upto = np.cumsum(w)  # the expanded array's entries 0..upto[k]-1 hold arr[k]
        total = upto[-1]

        def at(q: float) -> float:
            pos = q / 100 * (total - 1)
            lo = math.floor(pos)
            a = arr[int(np.searchsorted(upto, lo, side="right"))]
            b = arr[int(np.searchsorted(upto, min(lo + 1, total - 1), side="right"))]
            return float(a + (b - a) * (pos - lo))

        return Percentiles(float((arr * w).sum() / total), at(50), at(90), at(99))

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True)
class StepRecord:
    """What one step carried (given to ``observe`` when the step starts)."""

    replica: int
    start: float
    end: float
    decode: tuple[int, ...]  # request ids, one token each
    prefill: tuple[tuple[int, int], ...]  # (request id, tokens)
    admitted: tuple[int, ...]  # request ids admitted for the first time in this step
    kv_used: int  # blocks held after the step's allocations
    running: int
    repeat: int = 1  # identical decode steps this record stands for (coalesced into one event)


@dataclass(frozen=True)
class DisaggStats:
    """What a disaggregated run adds: the pools' sizes, the KV hand-off and the links' load."""

    prefill_workers: int
    decode_workers: int
    handoff: Percentiles  # prompt done on a prefill worker -> its KV on the decode worker (s)
    transfer: Percentiles  # the transfer itself: link latency + bytes / bandwidth (s)
    link_utilization: float  # busiest prefill worker's link: share of the recorded window it was sending
    prefill_batch: float  # mean prompt tokens per prefill step

    def as_dict(self) -> dict[str, Any]:
        return {
            "prefill_workers": self.prefill_workers,
            "decode_workers": self.decode_workers,
            "handoff": self.handoff.as_dict(),
            "transfer": self.transfer.as_dict(),
            "link_utilization": self.link_utilization,
            "prefill_batch": self.prefill_batch,
        }


@dataclass(frozen=True)
class EngineSimResult:
    """What one run measured (seconds, requests, tokens)."""

    engine: str
    replicas: int
    recorded: int
    ttft: Percentiles
    tpot: Percentiles
    itl_gap: Percentiles
    output_tokens_per_s: float
    requests_per_s: float
    queue_first_half: float
    queue_second_half: float
    queue_max: int
    stable: bool
    mean_decode_batch: float
    steps: int
    events: int
    preemptions: int
    simulated_time: float
    finish_order: tuple[int, ...] = field(repr=False)  # request ids as they finished (each once)
    first_admission: tuple[int, ...] = field(repr=False)  # request ids in order of first admission
    spec_tokens_per_step: float = math.nan  # speculative decoding: mean tokens one sequence's decode step emitted
    disagg: DisaggStats | None = None  # a disaggregated fleet's pools and KV transfers

    @property
    def queue_growth(self) -> float:
        """Change of the time-average waiting queue from the first to the second half, requests."""
        return self.queue_second_half - self.queue_first_half

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "engine": self.engine,
            "replicas": self.replicas,
            "recorded": self.recorded,
            "ttft": self.ttft.as_dict(),
            "tpot": self.tpot.as_dict(),
            "itl_gap": self.itl_gap.as_dict(),
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "queue": {
                "first_half": self.queue_first_half,
                "second_half": self.queue_second_half,
                "max": self.queue_max,
                "stable": self.stable,
            },
            "mean_decode_batch": self.mean_decode_batch,
            "steps": self.steps,
            "events": self.events,
            "preemptions": self.preemptions,
            "simulated_time": self.simulated_time,
            **({} if math.isnan(self.spec_tokens_per_step) else {"spec_tokens_per_step": self.spec_tokens_per_step}),
            **({} if self.disagg is None else {"disagg": self.disagg.as_dict()}),
        }


_SLO_KEYS = {
    "ttft_slo": ("ttft", "mean", "TTFT mean"),
    "itl_slo": ("tpot", "mean", "ITL (mean TPOT)"),
    "ttft_p90_slo": ("ttft", "p90", "TTFT p90"),
    "itl_p90_slo": ("tpot", "p90", "ITL p90 (TPOT)"),
    "ttft_p99_slo": ("ttft", "p99", "TTFT p99"),
    "itl_p99_slo": ("tpot", "p99", "ITL p99 (TPOT)"),
}


def sla_misses(result: EngineSimResult, slo: Mapping[str, float]) -> list[str]:
    """The SLOs (seconds; names of :data:`SLO_NAMES`) the run misses, as short texts; an unstable
    queue is a miss whatever the SLOs."""
    misses = []
    for name, limit in slo.items():
        if name not in _SLO_KEYS:
            raise UsageError(f"unknown SLO '{name}'", hint=f"known: {', '.join(_SLO_KEYS)}")
        metric, stat, label = _SLO_KEYS[name]
        value = getattr(getattr(result, metric), stat)
        if not value <= limit * (1 + 1e-12):
            misses.append(f"{label} {seconds_text(value)} > {seconds_text(limit)}")
    if not result.stable:
        misses.append("the queue grows (unstable)")
    return misses


SLO_NAMES = tuple(_SLO_KEYS)


def seconds_text(x: float) -> str:
    """A time for people: ``48.1 ms`` below a second, ``2.35 s`` from there."""
    if math.isnan(x):
        return "-"
    return f"{x * 1e3:,.1f} ms" if abs(x) < 1 else f"{x:,.3g} s" if abs(x) < 100 else f"{x:,.0f} s"
