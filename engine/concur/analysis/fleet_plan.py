"""``concur plan``: every configuration that could serve the traffic, cheapest first.

How it is designed, and why
---------------------------
The headline question -- *which GPU, at which tensor parallelism and precision, under which
engine, is cheapest for this model, this traffic and these SLAs* -- is the fleet question
(``formulas/llm_fleet.yaml``) asked for each configuration of a grid: GPUs x TP x (weight, KV)
dtypes x engines. Solving each one with the scalar solver would cost a goal seek per
configuration (hundreds of milliseconds: the replicas are torn out of a fixed point); the plan
instead rewrites the fleet question around the batch, where everything is forward:

* a replica at batch ``b`` holds ``b`` requests for ``W(b) = ttft(b) + output_tokens x itl(b)``,
  so it serves ``rate(b) = b / W(b)`` (Little's law); ``itl`` and ``ttft`` grow with ``b``;
* the fleet may run a replica up to ``b_max = min(per_replica_concurrency x utilization,
  the largest b meeting itl_slo, the largest b meeting ttft_slo)``;
* so ``replicas = ceil(arrival_rate / rate(b_max))`` -- the smallest fleet whose replicas need
  not run past ``b_max`` -- and the operating batch is where ``rate(b) = arrival_rate / replicas``.

This is the solver's own answer (``replicas = ceil(in_flight / (per_replica_concurrency x
utilization))`` with the SLAs as limits), read the other way round. ``itl(b)`` and ``ttft(b)``
come from the packs by one vectorised sweep (:mod:`concur.sweep`) per *plan shape* (the
configurations whose ``if_`` branches fold alike), over every configuration's batch grid at once;
the per-replica capacity from one forward run per configuration. The cheapest candidates are then
confirmed by the scalar solver (``concur solve`` on the same givens), whose replicas and latencies
are the ones reported.

Worked example: Llama-3.1-70B, 50 request/s of 1,000 in / 400 out, TTFT <= 2 s, ITL <= 50 ms:
on H100 TP4 bf16 the KV pool holds 322 requests per replica, but a replica's served steps
(decodes plus its share of 1,000-token prompts) carry about 7.8 request/s before the ITL target
binds, so 7 replicas, 28 GPUs.

``itl(b)`` is the *served* time per output token (``t_step_served``: every step carries the
batch's decodes and its share of the prompts) and ``ttft(b)`` the time to first token under load,
so ``rate(b) x output_tokens`` never exceeds what the replica serves. The plan computes in base
units end to end: the givens as :func:`resolve_givens` holds them go into the sweep and its
results come back in the same units (``sweep(..., base_units=True)``). Each row also carries
``compute_utilization`` and ``bandwidth_utilization`` at its operating batch (FLOP/s needed over the
GPUs' dense peak at the weights' precision; HBM bytes/s over bandwidth); a row above
:data:`UTILIZATION_CEILING` is rejected with that reason.

A configuration is rejected with its reason (``reason``, a sentence, and ``rejection``, the same
as data: ``kind``, ``variable``, ``value``, ``limit``): it does not fit ("the model does not fit: weights
... exceed ..."), TP does not divide the attention heads, an SLA cannot be met even at batch 1
("ITL 61 ms > 50 ms at the smallest batch"), its GPU has no list price at the provider the plan
prices at ("no list price at aws": :mod:`concur.analysis.providers`). Priced at a given
``gpu_hour_price``, every configuration is priced alike.

MoE layouts: for a model with routed experts the grid also has expert-parallel layouts
(:data:`LAYOUTS`): ``ep`` (ep = tp, whole experts per GPU, the MoE layers' all-reduce replaced by
an all-to-all) and ``ep+dp`` (the same with data-parallel attention, dp_attention = tp), and TP 16
(two 8-GPU nodes: wide EP over the scale-out link). Dense models keep ``tp`` alone. A layout whose
ep does not divide the routed experts is rejected with that reason; each row reports ``ep``,
``dp_attention`` and the ``nodes`` its replica spans (GPUs per node from the gpus catalog).

``modes=("agg", "disagg")`` adds a disaggregated row (a prefill and a decode pool, the KV link
between them) per configuration, sized by :mod:`concur.analysis.disagg_plan` from the same sweeps;
an ``axes["spec"]`` of ``("off", "on")`` adds speculative decoding (:data:`SPEC_PRESET`).
``prefill_gpus`` (ids of the gpus catalog) runs each disaggregated row's prefill pool on each of
them instead of the row's GPU: one row per configuration and prefill GPU (``Config.prefill_gpu``;
"" when it is the row's own GPU, so a plan without the axis is unchanged), each pool priced at its
own GPU's list price. A given ``gpu_hour_price`` is the decode GPU's (and a prefill pool's of that
type); a prefill pool on another GPU type pays ``prefill_gpu_hour_price`` when given, else its list
price, and a note says which (:mod:`concur.analysis.prefill_prices`).

Non-goals: mixed aggregated fleets, pipeline parallelism in the grid (give ``--set pp=N``),
queueing delay before admission (the ``queueing`` pack).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import BudgetError, ConcurError, UnderdeterminedError, UsageError
from ..lang.check import require_checked
from ..lang.library import get_catalog
from ..lang.model import Model, build_model
from ..lang.versions import current_version, split_id
from ..solver.givens import resolve_givens
from ..solver.html import html_number, html_table
from ..solver.plan import plan_key
from ..solver.question import solve_model
from ..solver.run import check_constraints, pack_defaults, run_question
from ..solver.throughput_inputs import require_draft_cost
from ..sweep import sweep
from .disagg_plan import (
    LINK_NAMES,
    decode_first_step,
    link_values,
    pick_prefill,
    prefill_gpu_values,
    prefill_options,
    prefill_tps,
)
from .prefill_prices import prefill_price_notes, price_prefill_pools
from .providers import plan_providers, provider_note

__all__ = [
    "AXES",
    "HOURS_PER_MONTH",
    "MAX_CONFIGS",
    "UTILIZATION_CEILING",
    "Candidate",
    "Config",
    "FleetPlan",
    "default_axes",
    "plan_fleet",
    "rows",
    "why_none",
]

HOURS_PER_MONTH = 730.0  # the cost pack's default (8,760 h / 12)
UTILIZATION_CEILING = 1.0
"""The most of the GPUs' dense peak FLOP/s (or HBM bandwidth) a row may need: beyond it, physics says no."""
_TRAFFIC = ("arrival_rate", "input_tokens", "output_tokens")
SPEC_PRESET = "mtp-1"
"""The speculation ``--spec on`` plans with: one MTP/EAGLE-style draft token (catalogs/speculators.yaml, sourced)."""
SPEC_NAMES = ("draft_tokens", "acceptance_rate", "mtp_layers", "draft_params", "draft_layers", "spec_tokens_per_step")


def spec_given() -> dict[str, Any]:
    """The givens of :data:`SPEC_PRESET` (draft_tokens, mtp_layers, acceptance_rate), numbers in their units."""
    entry = get_catalog("speculators").entries[SPEC_PRESET]
    return {name: value for name, (value, _source, _where) in entry.values.items()}


AXES = ("gpu", "tp", "weight_dtype", "kv_dtype", "engine", "provider", "ep", "dp_attention")  # never a given
LAYOUTS = ("tp", "ep", "ep+dp")
"""MoE layouts per TP degree: tensor-parallel experts (ep 1), expert parallelism (ep = tp), and
expert parallelism with data-parallel attention (ep = dp_attention = tp). Dense models: ``tp`` only."""


@dataclass(frozen=True)
class Config:
    """One point of the grid."""

    gpu: str
    tp: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    provider: str = ""  # whose list price (analysis.providers); "" = the price catalog's default
    mode: str = "agg"  # "agg": one replica serves prompts and decodes; "disagg": a prefill and a decode pool
    spec: str = "off"  # "on": speculative decoding as catalogs/speculators.yaml's SPEC_PRESET sets it
    ep: int = 1  # expert-parallel degree (1, or tp for an MoE layout)
    dp_attention: int = 1  # data-parallel attention ranks (1, or tp)
    prefill_gpu: str = ""  # disagg: the prefill pool's GPU when it is not ``gpu`` ("" = ``gpu``'s)

    def given(self) -> dict[str, Any]:
        """The configuration as givens of any pack that takes a gpu (the provider is not one)."""
        return {
            "gpu": self.gpu,
            "tp": self.tp,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "engine": self.engine,
            "ep": self.ep,
            "dp_attention": self.dp_attention,
            **(spec_given() if self.spec == "on" else {}),
        }

    @property
    def layout(self) -> str:
        """``tp8``, ``tp8 ep8`` or ``tp8 ep8 dpa8``: how one stage's GPUs split the model."""
        return (
            f"tp{self.tp}"
            + (f" ep{self.ep}" if self.ep > 1 else "")
            + (f" dpa{self.dp_attention}" if self.dp_attention > 1 else "")
        )

    def priced(self) -> dict[str, Any]:
        """``given()`` plus the provider whose list price the fleet question uses."""
        return {**self.given(), "provider": self.provider} if self.provider else self.given()


@dataclass
class Candidate:
    """A configuration and what it gives (base units: s, usd/month...), or why it is rejected."""

    config: Config
    feasible: bool = False
    reason: str = ""
    replicas: int | None = None
    gpus_per_replica: int | None = None
    per_replica_concurrency: float | None = None
    batch: float | None = None  # the operating batch per replica
    ttft: float | None = None
    itl: float | None = None
    cost_per_month: float | None = None
    cost_per_million_tokens: float | None = None
    gpu_hour_price: float | None = None  # usd per GPU-hour the cost was computed at
    binds: str = ""
    confirmed: bool = False  # replicas and latencies from the scalar solver
    compute_utilization: float | None = None  # FLOP/s needed over the fleet's dense peak
    bandwidth_utilization: float | None = None  # HBM bytes/s needed over bandwidth
    rejection: dict[str, Any] | None = None  # the reason as data: kind, variable, value, limit
    nodes: int | None = None  # servers one replica spans (gpus_per_replica / the GPU's gpus_per_node)
    # disaggregated rows: replicas / gpus_per_replica are the decode pool's; the prefill pool's here
    prefill_tp: int | None = None
    prefill_workers: int | None = None
    prefill_compute_utilization: float | None = None
    prefill_bandwidth_utilization: float | None = None
    kv_link_load: float | None = None
    prefill_gpu_hour_price: float | None = None  # usd per prefill GPU-hour (a row whose prefill GPU differs)

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def prefill(self) -> dict[str, Any] | None:
        """A disaggregated row's prefill pool, ``{"gpu", "tp", "workers"}`` (None for an aggregated row)."""
        if self.mode != "disagg":
            return None
        gpu = self.config.prefill_gpu or self.config.gpu
        return {"gpu": gpu, "tp": self.prefill_tp, "workers": self.prefill_workers}

    @property
    def decode(self) -> dict[str, Any] | None:
        """A disaggregated row's decode pool, ``{"gpu", "tp", "workers"}`` (None for an aggregated row)."""
        if self.mode != "disagg":
            return None
        return {"gpu": self.config.gpu, "tp": self.config.tp, "workers": self.replicas}

    @property
    def fleet_gpus(self) -> int | None:
        if self.replicas is None or self.gpus_per_replica is None:
            return None
        return self.replicas * self.gpus_per_replica + (self.prefill_workers or 0) * (self.prefill_tp or 0)

    def sort_key(self) -> tuple[Any, ...]:
        """Feasible first; then cheapest, fewest GPUs, quickest tokens (ITL), first token (TTFT)."""
        cost = self.cost_per_month if self.cost_per_month is not None else math.inf
        return (
            not self.feasible,
            cost,
            self.fleet_gpus or 0,
            self.itl or math.inf,
            self.ttft or math.inf,
            self.config.gpu,
            self.config.tp,
            self.config.prefill_gpu,
        )


@dataclass
class FleetPlan:
    """The question as given, every candidate (feasible cheapest first, then rejected) and notes."""

    question: dict[str, Any]
    candidates: list[Candidate]
    notes: list[str] = field(default_factory=list)
    arrival_rate: float = math.nan  # request/s (base units)
    output_tokens: float = math.nan  # token/request

    def _repr_html_(self) -> str:
        """A notebook table: the feasible configurations cheapest first (at most 25), then how many were
        rejected and why (each reason with its count), then the notes."""
        head = ["gpu", "tp", "w/kv", "engine", "replicas", "GPUs", "$/month", "TTFT ms", "ITL ms", "binds"]
        rows = [
            [
                c.config.gpu,
                c.config.tp,
                f"{c.config.weight_dtype}/{c.config.kv_dtype}",
                c.config.engine,
                c.replicas,
                c.fleet_gpus,
                "no price" if c.cost_per_month is None else html_number(round(c.cost_per_month)),
                html_number(None if c.ttft is None else c.ttft * 1e3),
                html_number(None if c.itl is None else c.itl * 1e3),
                c.binds,
            ]
            for c in self.feasible[:25]
        ]
        reasons: dict[str, int] = {}
        for c in self.candidates:
            if not c.feasible:
                reasons[c.reason] = reasons.get(c.reason, 0) + 1
        more = len(self.feasible) - len(rows)
        notes = ([f"{more} more feasible configurations"] if more > 0 else []) + [
            f"rejected ({n}): {reason}" for reason, n in sorted(reasons.items(), key=lambda item: -item[1])
        ]
        caption = f"concur plan: {len(self.feasible)} feasible of {len(self.candidates)} configurations"
        return html_table(head, rows, caption=caption, notes=notes + [f"note: {n}" for n in self.notes])

    @property
    def feasible(self) -> list[Candidate]:
        return [c for c in self.candidates if c.feasible]


def default_axes(model: Model, question: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The default grid: every catalog GPU; TP 1, 2, 4, 8 dividing the attention heads; (bf16, bf16),
    (bf16, fp8), (fp8, fp8) weights/KV; every engine of the engines catalog; the price catalog's
    default provider. An MoE model (routed experts in the models catalog) also gets TP 16 (two
    8-GPU nodes) and the expert-parallel layouts of :data:`LAYOUTS`."""
    moe = is_moe(question.get("model"))
    return {
        "gpu": list(get_catalog("gpus").entries),
        "tp": [1, 2, 4, 8, 16] if moe else [1, 2, 4, 8],
        "dtypes": [("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "fp8")],
        "engine": list(get_catalog("engines").entries),
        "provider": plan_providers(None),
        "layouts": list(LAYOUTS) if moe else ["tp"],
    }


def is_moe(model_id: Any) -> bool:
    """Whether the models catalog gives ``model_id`` routed experts (False for an unknown or no id)."""
    entry = get_catalog("models").entries.get(model_id) if isinstance(model_id, str) else None
    experts = entry.values.get("experts") if entry is not None else None
    return experts is not None and isinstance(experts[0], (int, float)) and experts[0] > 0


def _layouts(tp: int, names: Sequence[str]) -> list[tuple[int, int]]:
    """(ep, dp_attention) pairs of the named layouts at one TP degree; the EP ones need tp > 1."""
    pairs = {"tp": (1, 1), "ep": (tp, 1), "ep+dp": (tp, tp)}
    out = [pairs[n] for n in names if n == "tp" or tp > 1]
    return list(dict.fromkeys(out))


def _grid(axes: Mapping[str, Sequence[Any]]) -> list[Config]:
    return [
        Config(g, int(tp), w, k, e, p, spec=s, ep=ep, dp_attention=dp)
        for g in axes["gpu"]
        for tp in axes["tp"]
        for ep, dp in _layouts(int(tp), axes.get("layouts", ["tp"]))
        for w, k in axes["dtypes"]
        for e in axes["engine"]
        for p in (axes["provider"] if "provider" in axes else plan_providers(None))
        for s in axes.get("spec", ("off",))
    ]


MAX_CONFIGS = 50_000
"""Configurations one plan sizes at most: the grid's rows, times the prefill GPUs a disaggregated row
is tried on. The default grids hold a few hundred to a few thousand (an MoE model with every
provider, speculation and layout, 33,600); a milliseconds each they take seconds to a minute. A TP
axis of 1 to 4,999 (1.1 million rows) or every GPU as a prefill GPU with every provider (125,440)
ran for minutes."""


def _require_grid_size(configs: int, prefill_gpus: int) -> None:
    """Refuse, before anything is sized, a grid of more than :data:`MAX_CONFIGS` configurations."""
    sized = configs * max(1, prefill_gpus)
    if sized > MAX_CONFIGS:
        how = f" ({configs:,} x {prefill_gpus} prefill GPUs)" if prefill_gpus > 1 else ""
        raise UsageError(
            f"the plan's grid holds {sized:,} configurations{how}; a plan sizes at most {MAX_CONFIGS:,}",
            hint="narrow it: fewer GPUs, TP degrees, dtypes, engines, providers or prefill GPUs",
        )


def plan_fleet(
    question: Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]] | None = None,
    *,
    confirm: int = 3,
    progress: Callable[[int, int], None] | None = None,
    modes: Sequence[str] = ("agg",),
    prefill_gpus: Sequence[str] = (),
) -> FleetPlan:
    """Evaluate every configuration of ``axes`` for ``question`` (model, traffic, SLAs; the fleet
    pack's names and values); see the module essay. ``modes``: ``agg`` (one replica serves prompts
    and decodes), ``disagg`` (a prefill and a decode pool, :mod:`concur.analysis.disagg_plan`), or
    both; ``prefill_gpus``: the GPUs a disaggregated row's prefill pool runs on (empty: the row's
    own). Raises UsageError for a question that is wrong whatever the configuration (a missing
    traffic value, an unknown model, an unknown prefill GPU: field ``prefill_gpus``)."""
    model = build_model(["llm_fleet"])
    require_checked(model)
    question, link_question = _split_question(question, modes)
    axes = dict(axes or default_axes(model, question))
    _check_spec_axis(axes, question)
    if "gpu_hour_price" in question:  # the user's own price: no provider's list is in play
        axes["provider"] = [""]
    configs = _grid(axes)
    if not configs:
        raise UsageError("the grid is empty", hint="every axis needs at least one value")
    _require_grid_size(len(configs), len(prefill_gpus) if "disagg" in modes else 0)
    prefill = prefill_gpu_values(prefill_gpus, sorted({c.provider for c in configs})) if prefill_gpus else {}
    price_prefill_pools(link_question, axes["gpu"], prefill_gpus, prefill)
    probe = resolve_givens(model, {**question, **configs[0].priced()})  # a bad model or value fails once, here
    _require_positive(probe.values)
    _check_question_inputs(model, question, probe.values)
    slo: dict[str, float] = {n: probe.values[n] for n in ("itl_slo", "ttft_slo") if n in probe.values}
    rate, osl = probe.values["arrival_rate"], probe.values["output_tokens"]
    most = model.variables["replicas"].bounds[1] or math.inf
    candidates = [Candidate(c) for c in configs]
    capacity = _capacities(model, question, candidates, progress)
    curves = _curves(model, question, [c for c in candidates if c.config in capacity], capacity)
    for cand in candidates:
        if cand.config in curves:
            _size(cand, capacity[cand.config], curves[cand.config], rate, osl, slo, most)
    if not any(c.feasible for c in candidates) and any(c.reason.startswith(_TOO_MANY) for c in candidates):
        raise UsageError(
            f"arrival_rate {question['arrival_rate']} needs more than {most:,.0f} replicas (the most the fleet "
            "pack sizes) on every configuration that can serve it",
            variable="arrival_rate",
            hint="plan a share of the traffic (a region, a tenant) at a time",
        )
    notes: list[str] = []
    if "disagg" in modes:
        disagg, note = _disagg(
            model, question, link_question, candidates, capacity, curves, axes, (rate, osl, most), slo, prefill
        )
        notes.append(note)
    if "agg" not in modes:
        candidates = []
    notes[:0] = _confirm_cheapest(model, question, candidates, confirm, rate, osl)
    if "disagg" in modes:
        candidates.extend(disagg)
        candidates.sort(key=Candidate.sort_key)
    prices = prefill_price_notes(question, link_question, axes["gpu"], prefill_gpus, prefill)
    return FleetPlan(question, candidates, notes + _notes(question, candidates, configs, prices), rate, osl)


def _split_question(question: Mapping[str, Any], modes: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fleet question and, apart, the disaggregated rows' link and prefill TP; refuses unknown modes,
    a question without the model or the traffic, and an axis given as a value."""
    question = dict(question)
    bad = [m for m in modes if m not in ("agg", "disagg")]
    if bad or not modes:
        raise UsageError(f"unknown serving mode '{bad[0] if bad else ''}'", hint="modes: agg, disagg")
    link_question = {k: question.pop(k) for k in LINK_NAMES if k in question}
    missing = [n for n in ("model", *_TRAFFIC) if n not in question]
    if missing:
        raise UnderdeterminedError(
            f"a plan needs the model and the traffic: missing {', '.join(missing)}",
            missing=tuple(missing),
            hint=f"give {', '.join(missing)}",
            kind="missing",
        )
    fixed = [a for a in (*AXES, "prefill_gpu") if a in question]  # prefill_gpu: the prefill_gpus axis
    if fixed:
        raise UsageError(
            f"{', '.join(fixed)} is an axis of the plan, not a given",
            hint="narrow the axis instead",
            kind="axis_given",
        )
    return question, link_question


def _notes(
    question: Mapping[str, Any],
    candidates: Sequence[Candidate],
    configs: Sequence[Config],
    prefill_prices: Sequence[str] = (),
) -> list[str]:
    """What the plan assumed: unpriced rows, the default utilization, the provider (and ``prefill_prices``,
    what prices a prefill pool on another GPU type), the engines' releases."""
    notes = []
    unpriced = [c for c in candidates if c.feasible and c.cost_per_month is None]
    if unpriced:
        name = "prefill_gpu_hour_price" if all(_PREFILL_PRICE in c.reason for c in unpriced) else "gpu_hour_price"
        notes.append(
            f"{len(unpriced)} feasible configuration(s) have no public list price: give {name}=... to cost them"
        )
    if "utilization" not in question:
        notes.append("planned at utilization 0.8 (the fleet pack's default headroom; give utilization=... for another)")
    if "expert_imbalance" not in question and any(c.feasible and c.config.ep > 1 for c in candidates):
        notes.append(
            "expert-parallel rows assume balanced routing (expert_imbalance 1: the busiest GPU gets the mean "
            "share of routed tokens); give expert_imbalance=... for a measured ratio"
        )
    notes.append(provider_note(sorted({c.provider for c in configs}), question, cross=bool(prefill_prices)))
    notes.extend(prefill_prices)
    releases = engine_releases_note(sorted({c.engine for c in configs}))
    if releases:
        notes.append(releases)
    return notes


def _disagg(
    model: Model,
    question: Mapping[str, Any],
    link_question: Mapping[str, Any],
    agg: Sequence[Candidate],
    capacity: Mapping[Config, _Capacity],
    curves: Mapping[Config, tuple[Any, ...]],
    axes: Mapping[str, Sequence[Any]],
    traffic: tuple[float, float, float],
    slo: Mapping[str, float],
    prefill_gpus: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
) -> tuple[list[Candidate], str]:
    """The disaggregated rows of every configuration that runs (see :mod:`concur.analysis.disagg_plan`):
    one per prefill GPU of ``prefill_gpus`` (its values per (id, provider)), or one on the
    configuration's own GPU without them. The decode pool is sized once per configuration."""
    link, note = link_values(link_question)
    tps = [int(link_question["prefill_tp"])] if "prefill_tp" in link_question else [int(t) for t in axes["tp"]]
    runs = [c.config for c in agg if c.config in curves]
    decode_cap = {c: replace(capacity[c], values={**capacity[c].values, "prefill_share": 0.0}) for c in runs}
    decode = _curves(model, question, [Candidate(c) for c in runs], decode_cap, ("t_step_served",))
    ids = list(dict.fromkeys(g for g, _provider in prefill_gpus or {})) or [""]
    rows = {c: [replace(c, mode="disagg", prefill_gpu="" if g == c.gpu else g) for g in ids] for c in runs}
    lent = {r: (prefill_gpus or {})[(r.prefill_gpu, r.provider)] for c in runs for r in rows[c] if r.prefill_gpu}
    options = prefill_options([(r, capacity[c].values) for c in runs for r in rows[c]], tps, link, question, lent)
    out = []
    for config in runs:
        sized = Candidate(replace(config, mode="disagg"))
        first = math.nan
        if config not in decode:
            sized.reason = "the throughput model has no answer for this configuration's decode pool"
        else:
            first = _size_decode(sized, capacity[config], decode[config], traffic, slo)
        refused = prefill_tps(capacity[config].values, tps)[1]  # why llm_disagg takes none of the prefill TPs
        for row in rows[config]:
            cand = replace(sized, config=row)
            if cand.feasible:
                price = lent[row].get("prefill_gpu_hour_price") if row in lent else capacity[config].price
                _size_prefill(
                    cand, capacity[config], options.get(row, []), link, traffic, slo, price, first, refused=refused
                )
            out.append(cand)
    return out, note


def _size_decode(
    cand: Candidate,
    cap: _Capacity,
    curve: tuple[Any, ...],
    traffic: tuple[float, float, float],
    slo: Mapping[str, float],
) -> float:
    """The decode pool of a disaggregated row by :func:`_size` on its prefill-free curve (the residence
    is the output alone, only ``itl_slo`` binds); ``feasible`` says whether it serves the rate. Returns
    the decode worker's first step at the operating batch (:func:`disagg_plan.decode_first_step` of
    the curve's ``t_step_served``; nan when the pool does not serve)."""
    import numpy as np

    rate, osl, most = traffic
    batch, itl, _ttft, cu, bu, step = curve
    _size(
        cand,
        cap,
        (batch, itl, np.zeros_like(itl), cu, bu),
        rate,
        osl,
        {k: v for k, v in slo.items() if k == "itl_slo"},
        most,
    )
    if not cand.feasible or cand.batch is None:
        cand.reason = f"decode pool: {cand.reason}"
        return math.nan
    return decode_first_step(float(np.interp(cand.batch, batch, step)))


def _size_prefill(
    cand: Candidate,
    cap: _Capacity,
    options: Sequence[Any],
    link: Mapping[str, float],
    traffic: tuple[float, float, float],
    slo: Mapping[str, float],
    prefill_price: float | None,
    first: float,
    refused: str = "",
) -> None:
    """The prefill pool of a disaggregated row whose decode pool :func:`_size_decode` sized, by
    :func:`concur.analysis.disagg_plan.pick_prefill` (``first``: the decode worker's first step, s,
    part of the TTFT; ``refused``: why llm_disagg's input checks take no prefill TP, "" when they take
    one); then the link, the physics guard of the prefill pool (on the prefill GPU's figures), and the
    cost (``prefill_price``: usd per prefill GPU-second)."""
    rate, osl, most = traffic
    cand.feasible = False
    pick = pick_prefill(options, rate, cap.utilization, slo.get("ttft_slo"), first, most, refused)
    if pick.option is None:
        cand.reason, cand.rejection = pick.reason, pick.rejection
        return
    option = pick.option
    cand.prefill_tp, cand.prefill_workers, cand.ttft = option.tp, pick.workers, pick.ttft
    cand.binds = f"{cand.binds} / {'ttft_slo' if pick.workers > math.ceil(rate * option.capacity_service / cap.utilization * (1 - 1e-12)) else 'prefill compute'}"
    if _link_refuses(cand, option, pick.workers, rate, link):
        return
    per_worker = rate / pick.workers
    hbm = option.hbm_bandwidth if math.isfinite(option.hbm_bandwidth) else cap.values["hbm_bandwidth"]
    cand.prefill_compute_utilization = per_worker * option.peak_time
    cand.prefill_bandwidth_utilization = per_worker * option.weights_per_gpu / option.pass_prompts / hbm
    for name in ("prefill_compute_utilization", "prefill_bandwidth_utilization"):
        value = getattr(cand, name)
        if value > UTILIZATION_CEILING:
            cand.reason = f"beyond physics: the prefill pool needs {100 * value:.0f}% of its GPUs' {'dense peak FLOP/s' if 'compute' in name else 'HBM bandwidth'}"
            cand.rejection = {"kind": "physics", "variable": name, "value": value, "limit": UTILIZATION_CEILING}
            return
    cand.feasible = True
    _cost(cand, cap.price, rate, osl, prefill_price)


def _link_refuses(cand: Candidate, option: Any, workers: int, rate: float, link: Mapping[str, float]) -> bool:
    """Reject (True, with the reason) a row whose KV link cannot carry the rate (``kv_link_load`` > 1), whose
    prefill and decode workers do not fit the link's domain, or whose two GPU types an NVLink-like link
    (a finite domain: one board of one GPU type) would have to join."""
    decode_gpus = (cand.replicas or 0) * (cand.gpus_per_replica or 0)
    load = rate * option.kv_bytes / (link["kv_link_bandwidth"] * min(workers * option.tp, decode_gpus))
    cand.kv_link_load = load
    if load > 1:
        cand.reason = (
            f"the KV link carries {100 * load:.0f}% of what it can: arrival_rate x kv_transfer_bytes exceeds it"
        )
        cand.rejection = {"kind": "link", "variable": "kv_link_load", "value": load, "limit": 1.0}
        return True
    domain = link["kv_link_domain"]
    if cand.config.prefill_gpu and domain < _UNBOUNDED_DOMAIN:
        cand.reason = (
            f"the KV link joins the {domain:.0f} GPUs of one board, of one type: a {cand.config.prefill_gpu} "
            f"prefill pool and a {cand.config.gpu} decode pool need a scale-out link (kv_link=ib-ndr-400g)"
        )
        cand.rejection = {"kind": "link", "variable": "kv_link_domain", "value": domain, "limit": domain}
        return True
    if option.tp + (cand.gpus_per_replica or 0) > domain:
        cand.reason = (
            f"prefill TP{option.tp} + decode TP{cand.gpus_per_replica} do not fit the link's {domain:.0f}-GPU domain"
        )
        cand.rejection = {
            "kind": "link",
            "variable": "kv_link_domain",
            "value": option.tp + (cand.gpus_per_replica or 0),
            "limit": domain,
        }
        return True
    return False


def _check_spec_axis(axes: Mapping[str, Sequence[Any]], question: Mapping[str, Any]) -> None:
    """``spec`` values are off/on; speculation given by hand (draft_tokens=...) and the axis's "on" would
    contradict each other, so they are refused together."""
    spec = list(axes.get("spec", ("off",)))
    bad = [s for s in spec if s not in ("off", "on")]
    if bad or not spec:
        raise UsageError(f"unknown speculative decoding setting '{bad[0] if bad else ''}'", hint="spec: off, on")
    given = [n for n in SPEC_NAMES if n in question]
    require_draft_cost(question)
    if "on" in spec and given:
        raise UsageError(
            f"{given[0]} is given, and the plan's spec axis would set it too",
            variable=given[0],
            hint="give your own speculation with the spec axis off, or drop it and let the axis's 'on' use the catalog's",
            kind="spec_given",
        )


def engine_releases_note(engines: Sequence[str]) -> str:
    """Which release each engine id typed without one stands for (``vllm = vllm@0.11``), or "" when
    none does: a plan's rows say ``vllm``, the note says which vLLM (see concur.lang.versions)."""
    catalog = get_catalog("engines")
    read = []
    for engine in engines:
        name, typed = split_id(engine)
        release = current_version([catalog], name) if typed is None else None
        if release is not None:
            read.append(f"{name} = {name}@{release}")
    if not read:
        return ""
    return (
        f"engines are the releases the engines catalog names current: {', '.join(read)} "
        "(--engines NAME@VERSION names another fitted release)"
    )


_TOO_MANY = "needs more than"
_PREFILL_PRICE = "prefill_gpu_hour_price"
_UNBOUNDED_DOMAIN = 1e6  # kv_link_domain of a scale-out network (llm_disagg's default): it joins every GPU
_POSITIVE = ("arrival_rate", "output_tokens", "itl_slo", "ttft_slo", "utilization")


def _check_question_inputs(model: Model, question: Mapping[str, Any], probe: Mapping[str, float]) -> None:
    """The packs' input checks on what no configuration changes (the model, the lengths), with the
    switches' defaults (``context_fit``, ``kv_fit``): a question that fails one fails once, here,
    not once per configuration. ``probe``: the question resolved with the grid's first configuration."""
    asked = resolve_givens(model, dict(question)).values
    switches = {n: v for n, v in pack_defaults(model).items() if model.variables[n].choices}
    check_constraints(model, {**switches, **{n: probe[n] for n in asked}}, inputs_only=True)


def _require_positive(values: Mapping[str, float]) -> None:
    """A rate, an output length, an SLA or a utilization of zero (or less) asks nothing a fleet can
    answer (a division by it sizes every configuration): refused, naming the variable."""
    for name in _POSITIVE:
        if name in values and not (math.isfinite(values[name]) and values[name] > 0):
            raise UsageError(f"{name} must be a positive finite number for a plan", variable=name)


@dataclass(frozen=True)
class _Capacity:
    values: dict[str, float]  # the configuration's givens, presets expanded (base units)
    cap: float  # per_replica_concurrency x utilization, requests
    kv: float  # kv_concurrency, requests
    batch_cap: float
    gpus_per_replica: int
    price: float | None  # usd per gpu-second (base units)
    utilization: float


def _capacities(
    model: Model, question: Mapping[str, Any], candidates: list[Candidate], progress: Callable[[int, int], None] | None
) -> dict[Config, _Capacity]:
    """Per configuration: the givens and what one replica may hold; rejects those that cannot run."""
    out: dict[Config, _Capacity] = {}
    targets = ("per_replica_concurrency", "kv_concurrency", "batch_cap", "gpus_per_replica")
    base = {k: v for k, v in question.items() if k not in ("arrival_rate", "itl_slo", "ttft_slo")}
    for n, cand in enumerate(candidates):
        if progress is not None:
            progress(n, len(candidates))
        try:
            givens = resolve_givens(model, {**base, **cand.config.priced()})
        except ConcurError as exc:
            cand.reason = exc.message
            continue
        values = dict(givens.values)
        reason = _layout_reason(cand.config, values)
        if reason:
            cand.reason = reason
            continue
        try:
            _plan, env, _ = run_question(model, values, targets, givens.sources, trace=False)
        except ConcurError as exc:
            cand.reason = exc.message
            continue
        util = env["utilization"]
        cand.nodes = math.ceil(round(env["gpus_per_replica"]) / max(1.0, values.get("gpus_per_node", 8.0)))
        out[cand.config] = _Capacity(
            values,
            env["per_replica_concurrency"] * util,
            env["kv_concurrency"],
            env["batch_cap"],
            round(env["gpus_per_replica"]),
            values.get("gpu_hour_price"),
            util,
        )
    if progress is not None:
        progress(len(candidates), len(candidates))
    return out


def _layout_reason(config: Config, values: Mapping[str, float]) -> str:
    """Why a layout cannot run this model ("" when it can): TP (of the attention) must divide the
    attention heads, and EP the routed experts."""
    heads = values.get("attention_heads")
    attention_tp = config.tp // max(1, config.dp_attention)
    if heads and int(heads) % attention_tp:
        return f"tp {attention_tp} does not divide the {int(heads)} attention heads"
    experts = int(values.get("experts", 0) or 0)
    if config.ep > 1 and (experts == 0 or experts % config.ep):
        return f"ep {config.ep} does not divide the {experts} routed experts"
    return ""


_POINTS = 256  # batch grid points per configuration (geometric from 1 to the cap, plus the cap)


_SWEPT = ("itl", "ttft", "compute_utilization", "bandwidth_utilization")


def _curves(
    model: Model,
    question: Mapping[str, Any],
    candidates: list[Candidate],
    capacity: Mapping[Config, _Capacity],
    extra: tuple[str, ...] = (),
) -> dict[Config, tuple[Any, ...]]:
    """``(batch, itl, ttft, compute_utilization, bandwidth_utilization, *extra)`` arrays per configuration,
    in base units, from one vectorised sweep per plan shape (``extra``: more of the model's variables)."""
    import numpy as np

    swept = (*_SWEPT, *extra)
    groups: dict[Any, list[Config]] = {}
    for cand in candidates:
        cap = capacity[cand.config]
        key = plan_key(model, cap.values, swept)
        groups.setdefault((key[1], key[3]), []).append(cand.config)
    out: dict[Config, tuple[Any, ...]] = {}
    for configs in groups.values():
        names = sorted(set.intersection(*(set(capacity[c].values) for c in configs)) - {"concurrency"})
        choice = [n for n in names if model.variables[n].choices]
        numeric = [n for n in names if n not in choice]
        grids = [_batch_grid(capacity[c].cap) for c in configs]
        sizes = [len(g) for g in grids]
        over: dict[str, Any] = {"concurrency": np.concatenate(grids)}
        for n in numeric:
            over[n] = np.repeat([capacity[c].values[n] for c in configs], sizes)
        given: dict[str, Any] = {n: model.variables[n].choices[int(capacity[configs[0]].values[n])] for n in choice}
        # base units in and out (the givens as resolve_givens holds them); solved in _capacities
        result = sweep(model, over, given, list(swept), grid=False, validate=False, base_units=True)
        series = [np.asarray(result[n], dtype=float) for n in swept]
        start = 0
        for c, grid, size in zip(configs, grids, sizes):
            out[c] = (grid, *(x[start : start + size] for x in series))
            start += size
    return out


def _batch_grid(cap: float) -> Any:
    import numpy as np

    top = max(cap, 1.0)
    return np.unique(np.concatenate([np.geomspace(1.0, top, _POINTS), [top]]))


def _size(
    cand: Candidate,
    cap: _Capacity,
    curve: tuple[Any, ...],
    rate: float,
    osl: float,
    slo: Mapping[str, float],
    most: float = math.inf,
) -> None:
    """Replicas, operating batch and latencies of one configuration from its curves (module essay)."""
    import numpy as np

    batch, itl, ttft, cu, bu = curve
    ok = np.isfinite(itl) & np.isfinite(ttft)
    if not ok.any():
        cand.reason = "the throughput model has no answer for this configuration"
        return
    limits = [(cap.cap, "KV pool" if cap.kv <= cap.batch_cap else "engine batch cap")]
    for name, series, word in (("itl_slo", itl, "ITL"), ("ttft_slo", ttft, "TTFT")):
        if name not in slo:
            continue
        meets = ok & (series <= slo[name] * (1 + 1e-12))
        if not meets[0]:
            cand.reason = (
                f"{word} {series[0] * 1e3:.3g} ms > {slo[name] * 1e3:.3g} ms at the smallest batch "
                f"(one request per replica)"
            )
            cand.rejection = {"kind": "slo", "variable": name, "value": float(series[0]), "limit": slo[name]}
            return
        last = int(np.argmin(meets)) - 1 if not meets.all() else len(meets) - 1  # the first run that meets it
        edge = batch[last]
        if last + 1 < len(batch):  # interpolate to where the series crosses the target
            a, b, fa, fb = batch[last], batch[last + 1], series[last], series[last + 1]
            if fb > fa:
                edge = a + (b - a) * (slo[name] - fa) / (fb - fa)
        limits.append((float(min(edge, cap.cap)), name))
    b_max, binds = min(limits, key=lambda item: item[0])
    b_max = max(b_max, 1e-9)
    w = ttft + osl * itl
    served = np.where(ok, batch / w, np.nan)
    # A replica may run anywhere up to b_max; near a saturating prefill queue the rate it completes
    # can fall again (TTFT grows faster than the batch), so only the rising part counts.
    upto = ok & (batch <= b_max * (1 + 1e-12))
    if not upto.any():
        cand.reason = "the throughput model has no answer at one request per replica"
        return
    edge_rate = float(np.interp(b_max, batch, served))
    top = max(float(np.nanmax(served[upto])), edge_rate if np.isfinite(edge_rate) else 0.0)
    need = rate / top * (1 - 1e-12) if top > 0 else math.inf
    if not need <= most:  # also NaN and infinity: never handed to the solver's replica search
        cand.reason = f"{_TOO_MANY} {most:,.0f} replicas (the most the fleet pack sizes)"
        return
    replicas = max(1, math.ceil(need))
    per_replica = rate / replicas
    reach = np.flatnonzero(upto & (served >= per_replica * (1 - 1e-12)))
    if len(reach) == 0 or reach[0] == 0:
        operating = float(b_max if len(reach) == 0 else batch[0] * per_replica / served[0])
    else:
        i = int(reach[0])
        a, b, fa, fb = batch[i - 1], batch[i], served[i - 1], served[i]
        operating = float(a + (b - a) * (per_replica - fa) / (fb - fa)) if fb > fa else float(b)
    cand.replicas = replicas
    cand.gpus_per_replica = cap.gpus_per_replica
    cand.per_replica_concurrency = cap.cap / cap.utilization
    cand.batch = operating
    cand.itl = float(np.interp(operating, batch, itl))
    cand.ttft = float(np.interp(operating, batch, ttft))
    cand.compute_utilization = float(np.interp(operating, batch, cu))
    cand.bandwidth_utilization = float(np.interp(operating, batch, bu))
    cand.binds = binds
    if _beyond_physics(cand):
        return
    cand.feasible = True
    _cost(cand, cap.price, rate, osl)


def _beyond_physics(cand: Candidate) -> bool:
    """Reject a row whose operating batch needs more than UTILIZATION_CEILING of its GPUs' peak FLOP/s or bandwidth."""
    for name in ("compute_utilization", "bandwidth_utilization"):
        value = getattr(cand, name)
        if value is not None and value > UTILIZATION_CEILING:
            what = "dense peak FLOP/s" if name == "compute_utilization" else "HBM bandwidth"
            cand.feasible = False
            cand.reason = (
                f"beyond physics: needs {100 * value:.0f}% of its GPUs' {what} "
                f"(ceiling {100 * UTILIZATION_CEILING:.0f}%)"
            )
            cand.rejection = {"kind": "physics", "variable": name, "value": value, "limit": UTILIZATION_CEILING}
            return True
    return False


def _cost(cand: Candidate, price: float | None, rate: float, osl: float, prefill_price: float | None = None) -> None:
    """Price a sized row: its GPUs at ``price`` (usd per GPU-second); a disaggregated row whose prefill
    pool runs on another GPU prices that pool at ``prefill_price``. No price: the row is unpriced (or,
    at a named provider, rejected)."""
    cross = bool(cand.config.prefill_gpu)
    missing = cand.config.gpu if price is None else cand.config.prefill_gpu if cross and prefill_price is None else ""
    if missing or cand.fleet_gpus is None:
        cand.cost_per_month = cand.cost_per_million_tokens = None
        name = _PREFILL_PRICE if price is not None and missing else "gpu_hour_price"  # the prefill GPU's is missing
        cand.reason = f"no public list price for {missing or cand.config.gpu}: give {name}=..."
        if cand.config.provider:  # it would serve, but the plan's provider does not rent it
            where = f" for {missing}" if cross else ""
            cand.feasible, cand.reason = False, f"no list price at {cand.config.provider}{where}"
        return
    assert price is not None and cand.fleet_gpus is not None
    cand.gpu_hour_price = price * 3600.0  # price is usd per gpu-second in base units
    per_hour = cand.fleet_gpus * cand.gpu_hour_price
    if cross and prefill_price is not None:
        cand.prefill_gpu_hour_price = prefill_price * 3600.0
        prefill = (cand.prefill_workers or 0) * (cand.prefill_tp or 0)
        per_hour += prefill * (cand.prefill_gpu_hour_price - cand.gpu_hour_price)
    cand.cost_per_month = per_hour * HOURS_PER_MONTH
    cand.cost_per_million_tokens = per_hour / (rate * osl * 3600.0) * 1e6
    cand.reason = ""


def _confirm_cheapest(
    model: Model, question: Mapping[str, Any], candidates: list[Candidate], count: int, rate: float, osl: float
) -> list[str]:
    """Sort, then re-solve the ``count`` cheapest with the scalar solver. When the solver moves one
    (another replica count, or infeasible), the order is redone and the new top ``count`` confirmed
    in turn; notes for any the solver could not settle within its budget."""
    notes: list[str] = []
    tried: set[Config] = set()
    while True:
        candidates.sort(key=Candidate.sort_key)
        todo = [c for c in candidates if c.feasible][:count]
        todo = [c for c in todo if c.config not in tried]
        if not todo:
            return notes
        moved = False
        for cand in todo:
            tried.add(cand.config)
            before = (cand.feasible, cand.replicas)
            try:
                _confirm(model, question, cand, rate, osl)
            except BudgetError as exc:
                notes.append(
                    f"{_label(cand.config)}: sized from the sweep, not confirmed by the solver ({exc.message})"
                )
            moved = moved or (cand.feasible, cand.replicas) != before
        if not moved:
            candidates.sort(key=Candidate.sort_key)
            return notes


def _label(c: Config) -> str:
    mode = " disagg" if c.mode == "disagg" else ""
    mode = (" spec" if c.spec == "on" else "") + mode + (f" (prefill on {c.prefill_gpu})" if c.prefill_gpu else "")
    return f"{c.gpu} {c.layout} {c.weight_dtype}/{c.kv_dtype} {c.engine}{mode}" + (
        f" at {c.provider}" if c.provider else ""
    )


def _confirm(model: Model, question: Mapping[str, Any], cand: Candidate, rate: float, osl: float) -> None:
    """Re-solve a candidate with the scalar solver; its replicas and latencies are the ones reported,
    and a configuration the solver finds infeasible is rejected with the solver's reason."""
    try:
        sol = solve_model(
            model,
            ("replicas", "gpus_per_replica", "itl", "ttft", "batch", "compute_utilization", "bandwidth_utilization"),
            {**question, **cand.config.priced()},
        )
    except BudgetError:
        raise
    except ConcurError as exc:
        cand.feasible, cand.reason, cand.confirmed = False, exc.message, True
        cand.rejection = {"kind": "solver", "variable": None, "value": None, "limit": None}
        cand.replicas = cand.cost_per_month = cand.cost_per_million_tokens = None
        return
    cand.replicas = round(sol.values["replicas"])
    cand.gpus_per_replica = round(sol.values["gpus_per_replica"])
    cand.itl, cand.ttft, cand.batch = sol.values["itl"], sol.values["ttft"], sol.values["batch"]
    cand.compute_utilization = sol.values["compute_utilization"]
    cand.bandwidth_utilization = sol.values["bandwidth_utilization"]
    cand.confirmed = True
    if _beyond_physics(cand):
        cand.replicas = cand.cost_per_month = cand.cost_per_million_tokens = None
        return
    price = sol.values.get("gpu_hour_price")
    _cost(cand, price, rate, osl)


def why_none(result: FleetPlan) -> str:
    """One line saying why no configuration serves the question: the reasons counted, the nearest miss."""
    kinds: dict[str, int] = {}
    nearest: dict[str, tuple[float, str]] = {}
    for c in result.candidates:
        if "does not fit" in c.reason:
            kind = "do not fit in GPU memory"
        elif "at the smallest batch" in c.reason:
            word = c.reason.split()[0]
            kind = f"miss the {word} target even at one request per replica"
            excess = float(c.reason.split()[1]) / float(c.reason.split()[4])
            if kind not in nearest or excess < nearest[kind][0]:
                nearest[kind] = (excess, f"{_label(c.config)}: {c.reason.split(' at the')[0]}")
        elif "routed experts" in c.reason:
            kind = "have an EP that does not divide the routed experts"
        elif "does not divide" in c.reason:
            kind = "have a TP that does not divide the attention heads"
        elif c.reason.startswith("no list price at "):
            kind = f"have {c.reason} (--provider)"
        else:
            kind = c.reason.split(";")[0] or "have no answer"
        kinds[kind] = kinds.get(kind, 0) + 1
    parts = []
    for kind, n in sorted(kinds.items(), key=lambda item: -item[1]):
        parts.append(f"{n} {kind}" + (f" (nearest: {nearest[kind][1]})" if kind in nearest else ""))
    return f"no configuration of {len(result.candidates)} serves the question: " + ", ".join(parts)


def rows(result: FleetPlan) -> Iterable[dict[str, Any]]:
    """Each candidate as plain JSON-ready fields (the shape of ``concur plan --json``): ``mode`` is
    ``agg`` or ``disagg``; a disaggregated row adds ``prefill`` and ``decode`` (``gpu``, ``tp``,
    ``workers``; ``replicas`` and ``tp`` are the decode pool's, ``fleet_gpus`` both pools'), and one whose
    prefill pool runs on another GPU ``prefill_gpu_hour_price`` (``gpu_hour_price`` is the decode GPU's)."""
    for c in result.candidates:
        row = _row(c)
        if c.mode == "disagg":
            row["prefill"], row["decode"] = c.prefill, c.decode
            row["prefill_compute_utilization"] = c.prefill_compute_utilization
            row["prefill_bandwidth_utilization"] = c.prefill_bandwidth_utilization
            row["kv_link_load"] = c.kv_link_load
            if c.config.prefill_gpu:  # the prefill pool on another GPU: its own price
                price = c.prefill_gpu_hour_price
                row["prefill_gpu_hour_price"] = None if price is None else {"value": price, "unit": "usd/gpu/hour"}
        yield row


def _row(c: Candidate) -> dict[str, Any]:
    return {
        "mode": c.mode,
        "spec": c.config.spec,
        "gpu": c.config.gpu,
        "tp": c.config.tp,
        "ep": c.config.ep,
        "dp_attention": c.config.dp_attention,
        "nodes": c.nodes,
        "weight_dtype": c.config.weight_dtype,
        "kv_dtype": c.config.kv_dtype,
        "engine": c.config.engine,
        "provider": c.config.provider or None,
        "replicas": c.replicas,
        "fleet_gpus": c.fleet_gpus,
        "cost_per_month": None if c.cost_per_month is None else {"value": c.cost_per_month, "unit": "usd/month"},
        "cost_per_million_tokens": None
        if c.cost_per_million_tokens is None
        else {"value": c.cost_per_million_tokens, "unit": "usd"},
        "gpu_hour_price": None if c.gpu_hour_price is None else {"value": c.gpu_hour_price, "unit": "usd/gpu/hour"},
        "ttft": None if c.ttft is None else {"value": c.ttft * 1e3, "unit": "ms"},
        "itl": None if c.itl is None else {"value": c.itl * 1e3, "unit": "ms"},
        "batch_per_replica": c.batch,
        "per_replica_concurrency": c.per_replica_concurrency,
        "binds": c.binds or None,
        "compute_utilization": c.compute_utilization,
        "bandwidth_utilization": c.bandwidth_utilization,
        "feasible": c.feasible,
        "reason": c.reason,
        "rejection": c.rejection,
        "confirmed_by_solver": c.confirmed,
    }
