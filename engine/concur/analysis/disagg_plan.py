"""``concur plan --modes disagg``: disaggregated rows, a prefill pool and a decode pool per configuration.

How it is designed, and why
---------------------------
A disaggregated fleet (``formulas/llm_disagg.yaml``) is two pools that meet only through the
traffic and the KV link, so each is sized on its own and the plan stays forward:

* the **decode pool** is the aggregated replica of the same configuration with ``prefill_share``
  0 (its steps carry no prompt): its ``itl(b)`` comes from the same vectorised sweep as the
  aggregated rows (one per plan shape), and the aggregated rows' sizing (``fleet_plan._size``) sizes it
  with a residence of ``output_tokens x itl(b)`` (no prefill in it) against the KV pool, the
  engine's batch cap and ``itl_slo``;
* the **prefill pool** is, for each prefill TP of the grid's TP axis, ``prefill_batched_service`` per
  prompt, a prompt's share of a full pass (one vectorised sweep of the llm_disagg pack over every
  configuration x prefill TP); ``workers = ceil(rate x batched service / utilization)``, raised
  until the wait plus the service (a pass of one prompt) plus the
  KV transfer plus the decode worker's first step meet ``ttft_slo``; the wait is llm_disagg's
  ``prefill_wait``, the M/D/c wait of one queue in front of the pool (the routers send each prompt
  to a free worker; Cosmetatos's approximation, :func:`concur.maths.erlang.md_c_wait`); the prefill
  TP with the fewest GPUs wins (then the smaller TP);
* the **first token** streams from the decode worker (llm_disagg's ``decode_first_step``): the
  wait for its next step boundary, half a served step on average, then that step, so a row's TTFT
  adds :data:`FIRST_TOKEN_STEPS` x the sized decode pool's served step
  (:func:`decode_first_step`) -- the decode pool is sized first, so the term is known when the
  prefill pool is;
* the **link** must carry ``rate x kv_transfer_bytes`` over one path per GPU of the smaller pool
  (``kv_link_load <= 1``), and a prefill worker and its decode worker must fit the link's domain
  (NVLink: one 8-GPU board).

**A prefill pool on another GPU** (``concur plan --prefill-gpus``): a row keyed with a prefill GPU
gets that GPU's figures (:func:`prefill_gpu_values`: what llm_disagg's ``prefill_gpu`` preset fills,
memory, FLOP/s, HBM bandwidth, NVLink domain, family, list price at the row's provider) in place of
the ones ``prefill_gpu`` would borrow from ``gpu``; its prefill sweep is the same vectorised sweep,
one more point per prefill GPU (the decode pool is sized once per configuration). Such a row prices
each pool at its own GPU's price, and an NVLink (a finite link domain: one board of one GPU type)
cannot join two GPU types.

Invariants: a feasible disaggregated row has both pools' compute and bandwidth utilization at most
:data:`concur.analysis.fleet_plan.UTILIZATION_CEILING` (else it is rejected with a ``rejection``
of kind ``physics``), ``kv_link_load <= 1`` (else kind ``link``), and its TTFT, ITL within the
question's targets. The rows are sized from the sweeps; the scalar solver
(``concur solve llm_disagg``) gives the same pools and the same TTFT for the same givens
(tests/analysis/test_disagg.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConcurError, InfeasibleError, UnknownNameError, UsageError
from ..lang.fallback import fallback_pairs, fallback_values
from ..lang.model import Model, build_model
from ..maths.erlang import md_c_wait
from ..solver.givens import resolve_givens
from ..solver.plan import plan_key
from ..solver.run import run_question
from ..sweep import sweep

__all__ = [
    "DEFAULT_LINK",
    "FIRST_TOKEN_STEPS",
    "LINK_NAMES",
    "Prefill",
    "decode_first_step",
    "given_prefill_price",
    "link_values",
    "pick_prefill",
    "prefill_gpu_values",
    "prefill_options",
    "prefill_tps",
    "prefill_ttft",
]

DEFAULT_LINK = "ib-ndr-400g"
"""The link a plan assumes when the question names none: one 400 Gb/s NIC per GPU (DGX/HGX reference)."""
LINK_NAMES = (
    "kv_link",
    "kv_link_bandwidth",
    "kv_link_latency",
    "kv_link_domain",
    "prefill_tp",
    "prefill_gpu_hour_price",
)
"""The disaggregated rows' own givens, which the fleet pack does not take: the KV link, the prefill TP
and the price of a prefill GPU of another type than the decode GPU (:func:`given_prefill_price`)."""
_UNBOUNDED = 1e6  # kv_link_domain's default: a scale-out network joins every GPU
_LOAD_CAP = 0.999  # llm_disagg caps prefill_pool_load here in prefill_wait: a saturated pool reads as a long wait
FIRST_TOKEN_STEPS = 1.5
"""Served decode steps from the KV's arrival to the first token (llm_disagg's ``decode_first_step =
1.5 * t_step_served``): half a step's wait for the decode worker's step boundary, then the step."""
_LINK_VALUES = ("kv_link_bandwidth", "kv_link_latency", "kv_link_domain")
_OUT = (
    "prefill_service",
    "prefill_kv_room",
    "kv_transfer_bytes",
    "kv_transfer_time",
    "prefill_weights_per_gpu",
    "prefill_peak_time",
    "prefill_batched_service",
    "prefill_pass_prompts",
)


@dataclass(frozen=True)
class Prefill:
    """One prefill TP's figures for one configuration (base units: s, B)."""

    tp: int
    service: float  # s: a pass of one prompt on one worker (what a prompt finding it idle waits for)
    room: float  # B per GPU left after weights and overhead (< 0: does not fit)
    kv_bytes: float  # B per request moved to the decode pool
    transfer: float  # s per request over the link
    weights_per_gpu: float  # B
    peak_time: float  # s: one prompt's FLOPs on one GPU at the dense peak
    hbm_bandwidth: float = math.nan  # B/s of one prefill GPU (nan: the configuration's GPU's)
    batched: float = math.nan  # s per prompt in full passes (llm_disagg's prefill_batched_service; nan: service)
    pass_prompts: float = 1.0  # prompts one full pass carries
    sliceable: bool = True  # false: this TP cuts the block-scaled experts off their scale blocks' edges

    @property
    def capacity_service(self) -> float:
        """s of a worker's time per prompt once prompts queue (full passes): what sizes the pool."""
        return self.batched if math.isfinite(self.batched) else self.service


def disagg_model() -> Model:
    return build_model(["llm_disagg"])


def link_values(question: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    """The link as base-unit values (bandwidth B/s, latency s, domain) and a note saying which link."""
    model = disagg_model()
    given = {k: v for k, v in question.items() if k in _LINK_VALUES or k == "kv_link"}
    assumed = not given
    if assumed:
        given = {"kv_link": DEFAULT_LINK}
    values = resolve_givens(model, given).values
    missing = [n for n in ("kv_link_bandwidth", "kv_link_latency") if n not in values]
    if missing:
        raise UsageError(f"a disaggregated plan needs the KV link: missing {', '.join(missing)}", variable=missing[0])
    out = {n: float(values[n]) for n in _LINK_VALUES if n in values}
    out.setdefault("kv_link_domain", float(model.variables["kv_link_domain"].default or 1e6))
    word = f"kv_link = {given.get('kv_link', 'as given')}"
    note = (
        f"disaggregated rows move the KV cache over {DEFAULT_LINK} (assumed; give kv_link=ID for another)"
        if assumed
        else f"disaggregated rows move the KV cache over {word}"
    )
    return out, note


def given_prefill_price(question: Mapping[str, Any]) -> float | None:
    """``prefill_gpu_hour_price`` as the question gives it, in usd per GPU-second (base units), checked
    as llm_disagg checks it (its unit, its bounds); None when it is not given."""
    if "prefill_gpu_hour_price" not in question:
        return None
    given = {"prefill_gpu_hour_price": question["prefill_gpu_hour_price"]}
    return float(resolve_givens(disagg_model(), given).values["prefill_gpu_hour_price"])


def prefill_gpu_values(gpus: Sequence[str], providers: Sequence[str]) -> dict[tuple[str, str], dict[str, float]]:
    """Per (prefill GPU id, provider; "" the price catalog's default): the base-unit values llm_disagg's
    ``prefill_gpu`` preset fills from it (``prefill_gpu_memory``, ``prefill_hbm_bandwidth``, ...,
    ``prefill_gpu_hour_price`` where that provider lists one). Raises :class:`UnknownNameError` (field
    ``prefill_gpus``) for an id the gpus catalog does not list, with the closest ids."""
    model = disagg_model()
    names = {ours for ours, _theirs in fallback_pairs(model, "prefill_gpu")}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for gpu in dict.fromkeys(gpus):
        for provider in dict.fromkeys(providers):
            given = {"prefill_gpu": gpu, **({"provider": provider} if provider else {})}
            try:
                values = resolve_givens(model, given).values
            except UnknownNameError as exc:
                exc.field = "prefill_gpus"
                raise
            out[(gpu, provider)] = {n: float(v) for n, v in values.items() if n in names}
    return out


def prefill_tps(values: Mapping[str, float], tps: Sequence[int]) -> tuple[list[int], str]:
    """The prefill TPs of ``tps`` that llm_disagg's input checks accept for one configuration (``values``:
    its resolved givens): those dividing the attention heads, and under an EP or DP-attention layout
    only the decode TP (one layout for both pools); with none, the reason, else ""."""
    heads = values.get("attention_heads")
    fine = [tp for tp in tps if not (heads and int(heads) % tp)]
    if not fine:
        listed = ", ".join(str(tp) for tp in tps)
        return [], f"prefill pool: no prefill TP of {listed} divides the attention heads ({int(heads or 0)})"
    if values.get("ep", 1.0) > 1 or values.get("dp_attention", 1.0) > 1:
        same = [tp for tp in fine if tp == values.get("tp")]
        if not same:
            listed = ", ".join(str(tp) for tp in fine)
            return [], (
                f"prefill pool: an EP or DP-attention layout runs both pools at the decode TP "
                f"({int(values.get('tp', 0))}), not at prefill TP {listed}"
            )
        fine = same
    return fine, ""


def prefill_options(
    rows: Sequence[tuple[Any, Mapping[str, float]]],
    tps: Sequence[int],
    link: Mapping[str, float],
    question: Mapping[str, Any],
    prefill_gpus: Mapping[Any, Mapping[str, float]] | None = None,
) -> dict[Any, list[Prefill]]:
    """Per key of ``rows`` (key, resolved base-unit givens of its configuration): a :class:`Prefill` for
    each prefill TP of ``tps`` dividing the attention heads and fitting the prefill GPU (under an EP or
    DP-attention layout only the decode TP: llm_disagg has one layout for both pools), from one
    vectorised sweep of llm_disagg per plan shape. A key of ``prefill_gpus`` runs its prefill pool on
    the GPU whose :func:`prefill_gpu_values` it maps to; every other key on its configuration's GPU."""
    import numpy as np

    model = disagg_model()
    points: list[tuple[Any, int, dict[str, float]]] = []
    for key, values in rows:
        known = _prefill_known(model, values, (prefill_gpus or {}).get(key))
        weights = values.get("params", 0.0) * values.get("weight_bytes", 0.0)
        for tp in prefill_tps(values, tps)[0]:
            if weights / tp > known.get("prefill_gpu_memory", values.get("gpu_memory", math.inf)):
                continue  # the weights alone exceed the GPU: no need to sweep what cannot fit
            # the link's domain is checked by the caller, per pair of workers, with a reason of its own
            points.append((key, tp, {**known, **link, "kv_link_domain": _UNBOUNDED, "prefill_tp": float(tp)}))
    groups: dict[Any, list[int]] = {}
    for i, (_key, _tp, known) in enumerate(points):
        pk = plan_key(model, known, _OUT)
        groups.setdefault((pk[1], pk[3]), []).append(i)
    out: dict[Any, list[Prefill]] = {}
    for members in groups.values():
        names = sorted(set.intersection(*(set(points[i][2]) for i in members)))
        choice = [n for n in names if model.variables[n].choices]
        over: dict[str, Any] = {
            n: np.array([points[i][2][n] for i in members], dtype=float) for n in names if n not in choice
        }
        given = {n: model.variables[n].choices[int(points[members[0]][2][n])] for n in choice}
        try:
            result = sweep(model, over, given, list(_OUT), grid=False, validate=False, base_units=True)
        except ConcurError:
            continue  # the configurations' own (aggregated) rows already say why
        series = {n: np.asarray(result[n], dtype=float) for n in _OUT}
        for j, i in enumerate(members):
            key, tp, _ = points[i]
            out.setdefault(key, []).append(
                Prefill(
                    tp,
                    float(series["prefill_service"][j]),
                    float(series["prefill_kv_room"][j]),
                    float(series["kv_transfer_bytes"][j]),
                    float(series["kv_transfer_time"][j]),
                    float(series["prefill_weights_per_gpu"][j]),
                    float(series["prefill_peak_time"][j]),
                    points[i][2].get("prefill_hbm_bandwidth", math.nan),
                    float(series["prefill_batched_service"][j]),
                    float(series["prefill_pass_prompts"][j]),
                    math.isfinite(float(series["prefill_service"][j])) or _sliceable(model, points[i][2]),
                )
            )
    return out


def _sliceable(model: Model, known: Mapping[str, float]) -> bool:
    """Whether the prefill worker may slice the experts as ``known`` (one option's givens) asks. A point
    the sweep left NaN may have failed llm_disagg's check that block-scaled FP8 experts are sliced on
    their blocks' edges (the sweep says how many points failed a constraint, not which): one scalar
    run of that option names the constraint it fails, if any."""
    try:
        run_question(model, dict(known), ("prefill_expert_slice",), {}, trace=False)
    except InfeasibleError as exc:
        return "prefill_expert_slice" not in (exc.constraint or "")
    except ConcurError:
        return True  # another reason; the option's NaN figures say it does not serve
    return True


def _prefill_known(model: Model, values: Mapping[str, float], gpu: Mapping[str, float] | None) -> dict[str, float]:
    """The llm_disagg givens of one configuration's prefill pool: its own GPU's figures (``gpu``, from
    :func:`prefill_gpu_values`), or, without one, those ``prefill_gpu`` borrows from ``gpu`` (its fallback)."""
    known = {n: v for n, v in values.items() if n in model.variables}
    if gpu is not None:
        known.update(gpu)  # a price the provider does not list stays absent: never the decode GPU's
        return known
    known.update({n: lent[0] for n, lent in fallback_values(model, (), known).items()})
    return known


@dataclass(frozen=True)
class PrefillPick:
    """The chosen prefill pool, or why none serves (``reason``, ``rejection``)."""

    option: Prefill | None
    workers: int = 0
    ttft: float = math.nan
    reason: str = ""
    rejection: dict[str, Any] | None = None


def decode_first_step(step: float) -> float:
    """From the KV's arrival to the first token leaving the decode worker (s), ``step`` the decode
    pool's served step (s; llm_throughput's ``t_step_served``, all the tokens one step emits)."""
    return FIRST_TOKEN_STEPS * step


def prefill_ttft(option: Prefill, rate: float, workers: int, first: float) -> float:
    """llm_disagg's ``ttft`` of ``workers`` prefill workers at ``rate`` prompts a second (s): the pool's
    M/D/c wait (:func:`concur.maths.erlang.md_c_wait`: its load per worker in full passes, capped at
    :data:`_LOAD_CAP` as the pack caps it; its service a pass of one prompt), the service, the
    transfer and ``first``, the decode worker's first step."""
    rho = min(rate * option.capacity_service / workers, _LOAD_CAP)
    return md_c_wait(workers, workers * rho, option.service) + option.service + option.transfer + first


def _workers(
    option: Prefill, rate: float, utilization: float, ttft_slo: float | None, most: float, first: float
) -> tuple[int, float]:
    """The fewest workers that compute ``rate`` prompts a second at ``utilization`` and meet ``ttft_slo``
    (:func:`prefill_ttft`), with the TTFT they give; (0, inf) when none up to ``most`` does.

    The M/D/c wait falls as workers are added at a fixed load, so the fewest meeting the target are
    found by doubling the step from the utilization's count until one meets it, then bisecting."""
    workers = max(1, math.ceil(rate * option.capacity_service / utilization * (1 - 1e-12)))
    if workers > most:
        return 0, math.inf
    if ttft_slo is None:
        return workers, prefill_ttft(option, rate, workers, first)
    if ttft_slo - option.transfer - first <= option.service:
        return 0, math.inf

    def meets(n: int) -> bool:
        return prefill_ttft(option, rate, n, first) <= ttft_slo * (1 + 1e-12)

    fails, step = workers - 1, 1
    meet = workers
    while not meets(meet):
        if meet >= most:
            return 0, math.inf
        fails, step = meet, step * 2
        meet = int(min(meet + step, most))
    while meet - fails > 1:
        mid = (fails + meet) // 2
        fails, meet = (fails, mid) if meets(mid) else (mid, meet)
    return meet, prefill_ttft(option, rate, meet, first)


def pick_prefill(
    options: Sequence[Prefill],
    rate: float,
    utilization: float,
    ttft_slo: float | None,
    first_step: float,
    most: float = 100_000,
    refused: str = "",
) -> PrefillPick:
    """The prefill TP needing the fewest GPUs (then the smaller TP); a reason when none fits or meets the
    TTFT. ``first_step``: the decode worker's first step after the transfer (:func:`decode_first_step`
    of the sized decode pool), part of every row's TTFT. ``refused``: the reason when llm_disagg's input
    checks took no prefill TP (:func:`prefill_tps`), said instead of a memory fit when ``options`` is empty."""
    cut = sorted(o.tp for o in options if not o.sliceable)
    fits = [
        o for o in options if o.sliceable and o.room * o.tp >= o.kv_bytes and math.isfinite(o.service) and o.service > 0
    ]
    if not fits:
        if cut and not refused:
            refused = (
                f"prefill pool: prefill TP {', '.join(map(str, cut))} would slice the block-scaled FP8 experts off "
                "their scale blocks' edges (each GPU's share of an expert must be a multiple of the block); give a "
                "prefill_tp that leaves one, expert parallelism or bf16 weights"
            )
        return PrefillPick(
            None,
            reason=refused
            or "prefill pool: the model and one prompt's KV cache do not fit a prefill worker at any TP of the grid",
        )
    best: PrefillPick | None = None
    nearest = min(fits, key=lambda o: o.service + o.transfer)
    for option in fits:
        workers, ttft = _workers(option, rate, utilization, ttft_slo, most, first_step)
        if not workers:
            continue
        if (
            best is None
            or best.option is None
            or (workers * option.tp, option.tp) < (best.workers * best.option.tp, best.option.tp)
        ):
            best = PrefillPick(option, workers, ttft)
    if best is None:
        floor = nearest.service + nearest.transfer + first_step
        return PrefillPick(
            None,
            reason=(
                f"prefill pool: TTFT {floor * 1e3:.3g} ms > {(ttft_slo or 0) * 1e3:.3g} ms even with no queue "
                f"(the decode worker's first step {first_step * 1e3:.3g} ms included)"
            ),
            rejection={"kind": "slo", "variable": "ttft_slo", "value": floor, "limit": ttft_slo},
        )
    return best
