"""``concur plan --verify N``: simulate the cheapest plan rows step by step and mark SLA misses.

How is this designed, and why?
==============================

The plan sizes each configuration from the fleet pack's steady state (mean batch, mean step).
Verification replays each of the ``N`` cheapest feasible rows in the engine simulator
(:mod:`concur.analysis.enginesim`): the row's replicas, Poisson arrivals at the question's rate
routed to the least-loaded replica, the row's engine scheduler, KV pool and batch cap, every step
timed from its contents with the pack's constants (:mod:`concur.analysis.step_model`). The
simulated percentiles are then held against the SLAs:

* ``ttft_slo`` / ``itl_slo`` (the fleet pack's targets, means) against the simulated mean TTFT
  and mean TPOT;
* ``ttft_p90_slo``, ``itl_p90_slo``, ``ttft_p99_slo``, ``itl_p99_slo`` against the simulated
  percentiles (TTFT per request; ITL as TPOT per request, concur's meaning of ``itl``);
* a waiting queue that grows over the run (unstable) misses whatever the SLAs.

A row's run records ``requests`` requests after a warm-up of twice the row's requests in flight
(its batch x replicas: two residence times of arrivals), at least 200, so the statistics come
from a loaded fleet, not from one filling up. Deterministic for a seed.

**Disaggregated rows** (``"mode": "disagg"`` with ``"prefill"`` and ``"decode"``, each
``{"gpu", "tp", "workers"}``) run in :func:`~concur.analysis.enginesim_disagg.simulate_disagg`:
the two pools, the KV link the question names (``kv_link``, or ``kv_link_bandwidth`` with
``kv_link_latency``; the plan's assumed link otherwise), Poisson arrivals at the question's rate,
a warm-up of twice the requests a decode pool holds over a residence at its single-sequence step
(at least 200). **Speculative rows** need nothing of their own: the question's (or the row's
``"spec"``) ``draft_tokens`` and ``acceptance_rate`` / ``spec_tokens_per_step`` reach the step
model, and the decode steps draw their acceptances.

Non-goals: re-sizing a row that misses (the plan's formula does the sizing; the simulator only
checks it), fleets of mixed configurations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetError, ConcurError, UsageError
from ..lang.model import build_model
from ..lang.values import convert_value
from .arrivals import Synthetic
from .enginesim import SLO_NAMES, EngineSimResult, simulate_engine, sla_misses
from .enginesim_disagg import question_link, simulate_disagg, solve_pools
from .fleet_plan import Candidate, Config, FleetPlan
from .step_model import solve_engine

__all__ = [
    "MAX_VERIFY",
    "PERCENTILE_SLOS",
    "Verified",
    "disagg_layout",
    "slo_values",
    "split_percentile_slos",
    "verify_count",
    "verify_disagg_row",
    "verify_plan",
    "verify_row",
]

PERCENTILE_SLOS = tuple(n for n in SLO_NAMES if n not in ("ttft_slo", "itl_slo"))
MAX_VERIFY = 20
"""Rows one plan verifies at most. Each is a step-by-step run of some 2,000 requests (a quarter to
half a second on a laptop, more for a large fleet), and the cheapest rows are the ones worth
checking: ``--verify 1000000`` simulated every feasible row of the default grid, for minutes."""


def verify_count(count: int) -> int:
    """``count`` when it is a whole number in ``[0, MAX_VERIFY]``; else a :class:`UsageError`."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise UsageError(f"--verify takes a whole number >= 0, got {count!r}", variable="verify")
    if count > MAX_VERIFY:
        raise UsageError(
            f"--verify {count:,} asks for more simulated rows than a plan verifies ({MAX_VERIFY})",
            variable="verify",
            hint=f"verify the cheapest rows: --verify {MAX_VERIFY} or fewer",
        )
    return count


@dataclass(frozen=True)
class Verified:
    """A plan row's simulated latencies (seconds) and whether they meet the SLAs."""

    result: EngineSimResult | None  # None: the run did not finish (``misses`` says why)
    misses: tuple[str, ...]
    requests: int
    warmup: int
    seed: int
    scheduler: str

    @property
    def meets_sla(self) -> bool:
        return not self.misses

    def as_dict(self) -> dict[str, Any]:
        """The ``"verified"`` object of ``concur plan --json`` (milliseconds, as the rows' ttft/itl)."""
        r = self.result

        def ms(x: float) -> dict[str, Any] | None:
            return None if math.isnan(x) else {"value": x * 1e3, "unit": "ms"}

        if r is None:
            return {
                "ttft_p90": None,
                "itl_p90": None,
                "meets_sla": False,
                "misses": list(self.misses),
                "stable": False,
                "scheduler": self.scheduler,
                "requests": self.requests,
                "warmup": self.warmup,
                "seed": self.seed,
            }
        return {
            "ttft_p90": ms(r.ttft.p90),
            "itl_p90": ms(r.tpot.p90),
            "meets_sla": self.meets_sla,
            "misses": list(self.misses),
            "ttft_mean": ms(r.ttft.mean),
            "ttft_p99": ms(r.ttft.p99),
            "itl_mean": ms(r.tpot.mean),
            "itl_p99": ms(r.tpot.p99),
            "stable": r.stable,
            "scheduler": r.engine,
            "requests": self.requests,
            "warmup": self.warmup,
            "seed": self.seed,
        }


def split_percentile_slos(question: Mapping[str, Any], declared: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``question`` less the percentile SLOs its model does not declare (``declared``), and those SLOs."""
    rest = {k: v for k, v in question.items() if k not in PERCENTILE_SLOS or k in declared}
    pulled = {k: v for k, v in question.items() if k in PERCENTILE_SLOS and k not in declared}
    return rest, pulled


def slo_values(raw: Mapping[str, Any]) -> dict[str, float]:
    """SLO texts or numbers (a bare number in ms, as ``ttft_slo``'s display unit) in seconds."""
    model = build_model(["llm_fleet"])
    out: dict[str, float] = {}
    for name, value in raw.items():
        if name not in SLO_NAMES:
            continue
        var = model.variables.get(name) or model.variables["ttft_slo" if name.startswith("ttft") else "itl_slo"]
        try:
            seconds = convert_value(value, var)
        except ConcurError as exc:
            raise UsageError(
                f"{name}: {exc.message}", variable=name, hint=f"e.g. {name}='2 s'", kind="set_example"
            ) from None
        if not seconds > 0:
            raise UsageError(f"{name} must be a time > 0, got {value!r}", variable=name)
        out[name] = seconds
    return out


def verify_row(
    question: Mapping[str, Any],
    config: Config,
    replicas: int,
    batch: float,
    rate: float,
    slo: Mapping[str, float],
    *,
    requests: int = 2000,
    seed: int = 1,
    max_events: int | None = None,
) -> Verified:
    """Simulate one configuration at ``replicas`` replicas and ``rate`` request/s; see the module essay."""
    step, limits, values = solve_engine({**question, **config.given()})
    inp, out = round(values["input_tokens"]), round(values["output_tokens"])
    warmup = max(200, math.ceil(2 * batch * replicas))
    kw: dict[str, Any] = {} if max_events is None else {"max_events": max_events}
    scheduler = "mixed" if limits.mixed else "separate"
    try:
        result = simulate_engine(
            step,
            limits,
            Synthetic(rate, max(inp, 1), max(out, 1), seed=seed),
            requests=requests,
            warmup=warmup,
            replicas=replicas,
            seed=seed,
            **kw,
        )
    except BudgetError as exc:  # a queue so unstable that the run never ends within its budget
        return Verified(None, (f"{exc.message}: the queue grows without bound",), requests, warmup, seed, scheduler)
    return Verified(result, tuple(sla_misses(result, slo)), requests, warmup, seed, scheduler)


def verify_plan(
    result: FleetPlan,
    count: int,
    slo: Mapping[str, float],
    *,
    requests: int = 2000,
    seed: int = 1,
    max_events: int | None = None,
) -> dict[Config, Verified]:
    """Verify the ``count`` cheapest feasible rows of ``result`` (see the module essay)."""
    verify_count(count)
    out: dict[Config, Verified] = {}
    rows: list[Candidate] = [c for c in result.feasible if c.replicas or disagg_layout(c)][:count]
    for cand in rows:
        if disagg_layout(cand) is not None:
            out[cand.config] = verify_disagg_row(
                result.question, cand, result.arrival_rate, slo, requests=requests, seed=seed, max_events=max_events
            )
            continue
        assert cand.replicas is not None
        out[cand.config] = verify_row(
            result.question,
            cand.config,
            cand.replicas,
            cand.batch or 1.0,
            result.arrival_rate,
            slo,
            requests=requests,
            seed=seed,
            max_events=max_events,
        )
    return out


def _field(row: Any, key: str) -> Any:
    """``row[key]`` of a JSON row, or the attribute of a :class:`Candidate` (its config's when it has none)."""
    if isinstance(row, Mapping):
        return row.get(key)
    value = getattr(row, key, None)
    return value if value is not None else getattr(getattr(row, "config", None), key, None)


def disagg_layout(row: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A disaggregated plan row's pools, ``(prefill, decode)`` each ``{"gpu", "tp", "workers"}``, or None
    for an aggregated row. ``row``: a ``concur plan --json`` candidate or a :class:`Candidate` (whose
    config or itself carries ``mode``, and which carries ``prefill`` and ``decode``)."""
    if (_field(row, "mode") or "agg") != "disagg":
        return None
    pools = []
    for side in ("prefill", "decode"):
        pool = _field(row, side)
        if not isinstance(pool, Mapping):
            pool = {k: getattr(pool, k, None) for k in ("gpu", "tp", "workers")} if pool is not None else {}
        workers = pool.get("workers")
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise UsageError(
                f"a disaggregated row needs its {side} pool's workers (a whole number >= 1), got {workers!r}",
                variable=f"{side}_workers",
            )
        pools.append({k: pool.get(k) for k in ("gpu", "tp", "workers")})
    return pools[0], pools[1]


def _row_given(question: Mapping[str, Any], row: Any) -> dict[str, Any]:
    """The question with the row's configuration (dtypes, engine, gpu, tp) and speculation over it."""
    config = getattr(row, "config", None)
    if config is not None and hasattr(config, "given"):
        mine = dict(config.given())
    else:
        mine = {k: row[k] for k in ("gpu", "tp", "weight_dtype", "kv_dtype", "engine") if row.get(k) is not None}
    spec = _field(row, "spec")
    return {**question, **mine, **(dict(spec) if isinstance(spec, Mapping) else {})}


def verify_disagg_row(
    question: Mapping[str, Any],
    row: Any,
    rate: float,
    slo: Mapping[str, float],
    *,
    requests: int = 2000,
    seed: int = 1,
    max_events: int | None = None,
) -> Verified:
    """Simulate one disaggregated row (a JSON candidate or a :class:`Candidate`) at ``rate`` request/s."""
    layout = disagg_layout(row)
    if layout is None:
        raise UsageError("verify_disagg_row takes a row whose mode is disagg", variable="mode")
    given = _row_given(question, row)
    prefill, decode, kv_bytes, values = solve_pools(given, *layout)
    link, _ = question_link(
        {
            **question,
            **({"kv_link": row["link"]} if isinstance(row, Mapping) and isinstance(row.get("link"), str) else {}),
        }
    )
    inp, out = round(values["input_tokens"]), round(values["output_tokens"])
    residence = max(out, 1) * float(values.get("t_step", 0.0))
    warmup = max(200, math.ceil(2 * rate * residence))
    kw: dict[str, Any] = {} if max_events is None else {"max_events": max_events}
    try:
        result = simulate_disagg(
            prefill,
            decode,
            link,
            Synthetic(rate, max(inp, 1), max(out, 1), seed=seed),
            kv_bytes=kv_bytes,
            requests=requests,
            warmup=warmup,
            seed=seed,
            **kw,
        )
    except BudgetError as exc:
        return Verified(None, (f"{exc.message}: the queue grows without bound",), requests, warmup, seed, "disagg")
    return Verified(result, tuple(sla_misses(result, slo)), requests, warmup, seed, "disagg")
