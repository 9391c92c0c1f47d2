"""A measured throughput against the bound, and what binds.

How it is designed, and why
---------------------------
A measurement means something only next to the physics. Given a measured decode throughput
(or inter-token latency) at a stated concurrency and configuration, the ``llm_throughput`` pack
gives the roofline (``bound_tokens_per_s``: weights plus every sequence's KV read at full
bandwidth, or the FLOPs at peak), the calibrated *served* model (``tokens_per_s`` =
concurrency / ``t_step_served``: each step carries the decodes and the prompts' share, which is
what a loaded benchmark measures) and, through ``llm_memory``, the KV pool. The report is:

* **measured ÷ bound** -- above 1 means the inputs or the physics are wrong (exit 1);
* **which bound binds**, by the largest term of the modelled step: *bandwidth*
  (``memory_time / efficiency``), *compute* (``compute_time / (flops_fraction x efficiency)``), *prefill* (the
  prompts' share of the step, ``prefill_per_step``) or *fixed overhead* (``t_fixed``); and *KV
  capacity* when the concurrency is at the KV limit,
  ``floor(kv_batch_limit)`` (90 % or more of it), so the load cannot grow;
* the T3 signature **"KV pool full with idle compute"**: KV capacity binds while
  ``compute_time`` is under half the roofline step -- the GPU's FLOPs wait for memory that
  holds no more sequences; ``concur remedies`` lists what buys room.

Worked example: Llama-3.1-70B TP4 bf16 on H100, 1,024 in / 1,024 out, concurrency 64, measured
1,500 tok/s. KV limit floor(451,008 / 1,536) = 293 sequences, so KV does not bind; memory time
12.9 ms against compute 2.3 ms: bandwidth binds, measured ÷ bound 0.30.

Non-goals: queueing before admission is not separated from the step; a measurement taken with
other lengths than those given reads as another efficiency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..lang.model import build_model
from ..solver.question import solve_model
from ..sweep.vector import require_fixed

__all__ = ["IDLE_COMPUTE", "KV_FULL", "Diagnosis", "diagnose"]

KV_FULL = 0.9  # concurrency at or above this share of the KV limit: the pool is full
IDLE_COMPUTE = 0.5  # compute_time below this share of the roofline step: compute is idle


@dataclass(frozen=True)
class Diagnosis:
    """The numbers and the verdict (all times in ms, rates in token/s per replica)."""

    concurrency: float
    measured_tokens_per_s: float
    bound_tokens_per_s: float
    model_tokens_per_s: float
    ratio_to_bound: float
    ratio_to_model: float
    memory_ms: float
    compute_ms: float
    fixed_ms: float
    efficiency: float
    kv_limit: float
    binds: str  # bandwidth | compute | prefill | fixed overhead | KV capacity
    signature: str  # "" or "KV pool full with idle compute"
    advice: str


def diagnose(
    given: dict[str, Any], measured_tokens_per_s: float | None = None, measured_itl_ms: float | None = None
) -> Diagnosis:
    """Compare a measurement with ``llm_throughput`` for the scenario ``given`` (must include
    concurrency, input_tokens, output_tokens and a configuration). Exactly one measurement.
    Raises ``UsageError`` / ``UnderdeterminedError`` for a bad question."""
    if (measured_tokens_per_s is None) == (measured_itl_ms is None):
        raise UsageError(
            "give exactly one measurement: --measured-tokens-per-s or --measured-itl",
            hint="tokens/s is decode output of the whole replica at the stated concurrency",
        )
    for flag, value, unit in (
        ("--measured-tokens-per-s", measured_tokens_per_s, ""),
        ("--measured-itl", measured_itl_ms, " (ms)"),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):  # nan passed 'value <= 0'
            raise UsageError(f"{flag} must be a finite number > 0{unit}, got {value:g}")
    model = build_model(["llm_throughput"])
    outputs = (
        "bound_tokens_per_s",
        "tokens_per_s",
        "memory_time",
        "compute_time",
        "t_step_bound",
        "prefill_per_step",
        "kv_batch_limit",
        "input_tokens",
        "output_tokens",
    )
    require_fixed(model, given, outputs)
    g = {"kv_fit": "ignore", **given}  # the measured run did hold its batch: diagnose it, do not refuse it
    sol = solve_model(model, tuple(o for o in outputs if o not in g), g)
    c = sol.value("concurrency")
    if c <= 0:
        raise UsageError("concurrency must be positive to diagnose a throughput", variable="concurrency")
    if measured_tokens_per_s is not None:
        measured = measured_tokens_per_s
    else:
        assert measured_itl_ms is not None  # exactly one measurement, checked above
        measured = c * 1000.0 / measured_itl_ms
    eff = sol.values["efficiency"]
    mem, comp, fixed = sol.value("memory_time"), sol.value("compute_time"), sol.values["t_fixed"] * 1000
    bound, modelled = sol.value("bound_tokens_per_s"), sol.value("tokens_per_s")
    kv_limit = float(math.floor(sol.value("kv_batch_limit") + 1e-9))
    prefill = sol.value("prefill_per_step")
    ff = sol.values.get("flops_fraction", 1.0)
    terms = {"bandwidth": mem / eff, "compute": comp / (ff * eff), "prefill": prefill, "fixed overhead": fixed}
    binds = max(terms, key=lambda k: terms[k])
    kv_full = kv_limit <= 0 or c >= KV_FULL * kv_limit
    signature = ""
    if kv_full:
        binds = "KV capacity"
        if comp < IDLE_COMPUTE * max(mem, comp):
            signature = "KV pool full with idle compute"
    ratio = measured / bound
    if ratio > 1 + 1e-9:
        advice = (
            "the measurement beats the roofline: check the configuration (tp, dtypes, GPU), the "
            "lengths and what the number counts (prefill tokens? several replicas?)"
        )
    elif signature:
        whole = sol.value("input_tokens") + sol.value("output_tokens")
        advice = (
            f"the batch is capped by KV memory ({kv_limit:g} sequences of {whole:g} "
            f"tokens) while compute runs at {comp / max(mem, comp):.0%} of the step: "
            "run `concur remedies` on the same scenario"
        )
    elif binds == "KV capacity":
        advice = "the KV pool limits the batch: `concur remedies` lists what buys room"
    elif binds == "fixed overhead":
        advice = "per-step overhead dominates: raise the concurrency, enable CUDA graphs, check the scheduler"
    elif binds == "prefill":
        advice = (
            "the prompts' prefill takes most of each step: shorter prompts, prefix caching, or more "
            "compute per replica (fp8 weights, more GPUs)"
        )
    elif binds == "compute":
        advice = "compute-bound: fp8 weights (FP8 tensor peak) or more GPUs raise the ceiling"
    else:
        advice = "bandwidth-bound: fewer bytes per step (fp8 weights / KV) or more GPUs per replica"
    return Diagnosis(
        c,
        measured,
        bound,
        modelled,
        ratio,
        measured / modelled,
        mem,
        comp,
        fixed,
        eff,
        kv_limit,
        binds,
        signature,
        advice,
    )
