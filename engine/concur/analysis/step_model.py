"""The time of one engine step, from the throughput pack's constants but not its steady state.

How is this designed, and why?
==============================

``formulas/llm_throughput.yaml`` times a *steady* decode step: every sequence at the average
context, one prefill per request spread evenly over the steps. The engine simulator
(:mod:`concur.analysis.enginesim`) needs the time of *this* step: these decoding sequences at
their own contexts, these prefill chunks. :class:`StepModel` is the pack's physics taken apart
into per-token and per-context-token coefficients, so a step of any composition can be timed:

* memory: ``weights_time(n) + kv_time_per_token x (context tokens the step reads)``, the
  weights read once per step (for MoE, only the experts the step's ``n`` tokens route to, as the
  pack's ``weights_read``) plus every sequence's KV cache;
* compute: ``n x token_time`` (2 flop per active parameter) plus ``attn_time x (query x key
  pairs)``: a decode token at context ``L`` attends to ``L`` keys, a prefill chunk of ``c`` tokens
  starting at position ``p`` to ``c x p + c(c+1)/2`` (causal). A prompt token's matmuls cost
  ``prefill_token_time`` (the routed experts' grouped GEMMs at the engine's moe_gemm_efficiency)
  and its attention pairs run at the BF16 peak times the engine's prefill_attention_rate (its MLA
  kernel's measured rate for an MLA model), as the pack's prefill_token_time says;
* ``t = max(memory, decode compute + prefill compute x efficiency / efficiency_prefill) /
  efficiency + t_comm(n) + t_fixed``: the pack's decode step, with the prefill tokens' FLOPs at
  the engine's prefill efficiency; ``t_comm(n)`` the all-reduces of ``n`` tokens.

Every coefficient is a time, read from one solved question of the fleet pack by
:func:`engine_from_values` -- the one function that knows the packs' variable names, and that
reads them defensively (a name the packs no longer define falls back to the pack's published
default, or the whole adapter says which is missing). A decode-only step of ``b`` sequences at
the pack's ``kv_read_context`` reproduces the pack's ``t_step`` at concurrency ``b`` (the test
suite checks it), so the simulator inherits the pack's constants and nothing else.

Worked example: Llama-3.1-70B bf16 on 4 x H100 (vLLM constants): the weights take 10.5 ms to
read per step, each context token 0.0245 us; a decode step of 100 sequences at context 1,200
reads 13.5 ms and costs about 25 ms with the fixed and all-reduce costs.

Non-goals: pipeline parallelism's bubbles (layers are divided by ``pp``, nothing more),
MLA's different prefill form, CPU scheduling overlap. Speculative decoding: ``spec``
(:mod:`concur.analysis.speculation`) when the question sets ``draft_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..lang.model import build_model
from ..solver.givens import resolve_givens
from ..solver.run import pack_defaults, run_question
from ..solver.throughput_inputs import require_draft_cost
from .speculation import Speculation

__all__ = ["EngineLimits", "StepModel", "engine_from_values", "solve_engine"]


@dataclass(frozen=True)
class StepModel:
    """Per-step time coefficients of one replica, all in seconds (see the module essay)."""

    weights_time: float  # reading every weight once
    active_fraction: float  # MoE: share of the weights one token reads (1 for dense)
    expert_decay: float  # MoE: how fast more tokens uncover unread experts
    kv_time_per_token: float  # reading one context token of KV cache
    token_time: float  # 2 flop per active parameter of one token, at peak x flops_fraction
    attn_time: float  # one (query, key) attention pair, at peak x flops_fraction
    efficiency: float
    efficiency_prefill: float
    comm_fixed: float  # the all-reduces' fixed latency per step (0 at tp 1)
    comm_per_token: float  # the all-reduces' bandwidth term per token in the step
    t_fixed: float
    window_share: float = 0.0  # share of layers with sliding-window attention
    window: float = math.inf  # their window, tokens
    spec: Speculation | None = None  # speculative decoding (None: one token per sequence and step)
    expert_read_time: float | None = None  # MoE: the pack's expert_read_scale at full bandwidth (None: older form)
    prefill_attn_time: float | None = None  # one causal prompt (query, key) pair (None: attn_time; MLA differs)
    prefill_token_time: float | None = None  # a prompt token's matmuls, MoE grouped GEMMs included (None: token_time)

    def weights(self, tokens: float) -> float:
        """Time to read the weights a step of ``tokens`` tokens touches: all but the routed experts
        none of them routes to (the pack's weights_read and chunk_weights_read)."""
        if self.expert_read_time is not None:
            if self.expert_read_time <= 0:
                return self.weights_time
            return self.weights_time - self.expert_read_time * math.exp(-min(self.expert_decay * tokens, 600.0))
        if self.active_fraction >= 1 or tokens <= 0:
            return self.weights_time
        unread = (1 - self.active_fraction) * math.exp(-self.expert_decay * (tokens - 1))
        return self.weights_time * (1 - unread)

    def kv_tokens(self, context: Any) -> Any:
        """Context tokens of KV one sequence at ``context`` reads, averaged over the layers (numpy-friendly)."""
        if self.window_share <= 0:
            return context
        import numpy as np

        return (1 - self.window_share) * context + self.window_share * np.minimum(context, self.window)

    def time(
        self,
        decode_tokens: int,
        decode_context: float,
        prefill_tokens: int,
        prefill_pairs: float,
        prefill_context: float,
        verify: int = 1,
    ) -> float:
        """One step: ``decode_tokens`` sequences whose contexts sum to ``decode_context`` (KV read, keys
        attended), ``prefill_tokens`` prompt tokens in chunks with ``prefill_pairs`` causal (query, key)
        pairs and ``prefill_context`` tokens of KV read (prior context plus the chunk). ``verify`` tokens
        per decoding sequence run through the target (speculative verification: their FLOPs and
        all-reduces, the KV read once); the draft's time is not included (:meth:`Speculation.draft_time`)."""
        n = decode_tokens * verify + prefill_tokens
        memory = self.weights(n) + self.kv_time_per_token * (decode_context + prefill_context)
        decode = decode_tokens * verify * self.token_time + self.attn_time * verify * decode_context
        pair = self.attn_time if self.prefill_attn_time is None else self.prefill_attn_time
        per_token = self.token_time if self.prefill_token_time is None else self.prefill_token_time
        prefill = prefill_tokens * per_token + pair * prefill_pairs
        compute = decode + prefill * self.efficiency / self.efficiency_prefill
        comm = self.comm_fixed + self.comm_per_token * n if self.comm_fixed or self.comm_per_token else 0.0
        return max(memory, compute) / self.efficiency + comm + self.t_fixed

    def decode_times(self, decode_tokens: int, decode_contexts: Any) -> Any:
        """:meth:`time` of decode-only steps of ``decode_tokens`` sequences, one per entry of the numpy
        array ``decode_contexts``; the same floating-point operations in the same order, so each entry
        equals the scalar call exactly."""
        import numpy as np

        memory = self.weights(decode_tokens) + self.kv_time_per_token * (decode_contexts + 0.0)
        decode = decode_tokens * self.token_time + self.attn_time * decode_contexts
        compute = decode + 0.0 * self.efficiency / self.efficiency_prefill
        comm = self.comm_fixed + self.comm_per_token * decode_tokens if self.comm_fixed or self.comm_per_token else 0.0
        return np.maximum(memory, compute) / self.efficiency + comm + self.t_fixed


@dataclass(frozen=True)
class EngineLimits:
    """What the scheduler of one replica may hold: the KV pool in blocks, the batch cap, the per-step
    token budget, whether a step mixes prefill chunks with decodes (``mixed``) or runs prefills
    as batches of their own, and whether admission reserves a request's whole context (``reserve``:
    it then never preempts; a scheduler of separate prefill batches always reserves)."""

    kv_blocks: int
    block_size: int
    max_num_seqs: int
    token_budget: int
    mixed: bool
    reserve: bool = False
    prefix_caching: bool = False  # a preempted request's cached prefix blocks spare their recomputation

    @property
    def on_demand(self) -> bool:
        """Blocks taken as tokens are computed, preempting when they run out (vLLM's mixed scheduler)."""
        return self.mixed and not self.reserve

    def __post_init__(self) -> None:
        for name in ("kv_blocks", "block_size", "max_num_seqs", "token_budget"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"{name} must be a whole number >= 1, got {value!r}", variable=name)

    @property
    def kv_tokens(self) -> int:
        return self.kv_blocks * self.block_size


# The pack's published defaults, used only when a solved question lacks the name (a pack edited
# under the adapter): each is the default of the variable in formulas/llm_throughput.yaml or
# llm_memory.yaml, or vLLM's engine default recorded in formulas/catalogs/engine_limits.yaml.
_FALLBACK = {
    "active_fraction": 1.0,
    "expert_decay": 1.0,
    "pp": 1.0,
    "ep": 1.0,
    "dp_attention": 1.0,
    "sliding_window_layers": 0.0,
    "prefill_overlap": 1.0,
    "draft_tokens": 0.0,
    "acceptance_rate": 0.0,
    "draft_params": 0.0,
    "draft_layers": 0.0,
    "mtp_layers": 0.0,
    "block_size": 16.0,
    "batch_cap": 256.0,
    "token_budget": 8192.0,
    "kv_reserve": 0.0,
    "prefix_caching": 0.0,
    "prefill_attention_rate": 1.0,
}
_REQUIRED = (
    "weights_per_gpu",
    "kv_per_token",
    "hbm_bandwidth",
    "peak_flops",
    "flops_fraction",
    "efficiency",
    "efficiency_prefill",
    "t_fixed",
    "active_params_per_gpu",
    "attention_flops",
    "kv_read_context",
    "layers",
    "tp",
    "kv_blocks",
)


def engine_from_values(values: Mapping[str, float], **override: Any) -> tuple[StepModel, EngineLimits]:
    """The adapter: a :class:`StepModel` and :class:`EngineLimits` from one solved question of
    ``llm_fleet`` (or ``llm_throughput`` plus ``llm_memory``) in base units. ``override`` sets
    ``max_num_seqs``, ``token_budget``, ``block_size``, ``kv_blocks``, ``mixed`` or ``reserve`` directly.
    Under data-parallel attention each of the ``dp_attention`` ranks holds its own requests' KV in a
    pool of ``kv_blocks`` (the pack's per-GPU pool): the replica's pool is their sum, one pool here
    (requests spread evenly over the ranks, as the pack's kv_batch_limit assumes).
    Raises :class:`UsageError` naming the values the question did not produce."""
    missing = [n for n in _REQUIRED if n not in values]
    if missing:
        raise UsageError(
            f"the engine simulator needs {', '.join(missing)} from the throughput pack",
            hint="give the model, gpu, tp, dtypes and engine",
            kind="give_config",
        )

    def get(name: str, *alternatives: str) -> float:
        for n in (name, *alternatives):
            if n in values and math.isfinite(values[n]):
                return float(values[n])
        return _FALLBACK[name]

    bw = values["hbm_bandwidth"]
    flops = values["peak_flops"] * values["flops_fraction"]
    attention_flops = values.get("peak_flops_attention", values["peak_flops"]) * values["flops_fraction"]
    layers = math.ceil(values["layers"] / get("pp"))
    # a step's collectives as the pack charges them: the tensor-parallel all-reduces over the link tp
    # crosses, or an MoE layout's all-to-all and DP-attention all-reduces (0 on one GPU)
    comm_fixed, comm_per_token = values["t_comm_latency"], values["t_comm_per_token"]
    context = values["kv_read_context"]
    sliding = get("sliding_window_layers")
    step = StepModel(
        weights_time=values["weights_per_gpu"] / bw,
        active_fraction=get("active_fraction"),
        expert_decay=get("expert_decay"),
        kv_time_per_token=values["kv_per_token"] / bw,
        token_time=2 * values["active_params_per_gpu"] / flops,
        attn_time=(values["attention_flops"] / context if context > 0 else 0.0) / attention_flops,
        efficiency=values["efficiency"],
        efficiency_prefill=values["efficiency_prefill"],
        comm_fixed=comm_fixed,
        comm_per_token=comm_per_token,
        t_fixed=values["t_fixed"],
        window_share=sliding / values["layers"] if sliding > 0 else 0.0,
        window=values.get("sliding_window", math.inf) if sliding > 0 else math.inf,
        spec=_speculation(values, get),
        expert_read_time=values["expert_read_scale"] / bw if "expert_read_scale" in values else None,
        prefill_attn_time=_prefill_pair_time(
            values,
            layers,
            values.get("peak_flops_bf16", 0.0) * values["flops_fraction"] * get("prefill_attention_rate"),
        ),
        prefill_token_time=2 * values["prefill_gemm_params_per_gpu"] / flops
        if "prefill_gemm_params_per_gpu" in values
        else None,
    )
    limits = EngineLimits(
        kv_blocks=int(override.get("kv_blocks") or values["kv_blocks"] * get("dp_attention")),
        block_size=int(override.get("block_size") or get("block_size")),
        max_num_seqs=int(override.get("max_num_seqs") or get("batch_cap", "max_num_seqs")),
        token_budget=int(override.get("token_budget") or get("token_budget")),
        mixed=bool(override["mixed"]) if override.get("mixed") is not None else get("prefill_overlap") >= 0.5,
        reserve=bool(override["reserve"]) if override.get("reserve") is not None else get("kv_reserve") >= 0.5,
        prefix_caching=get("prefix_caching") >= 0.5,
    )
    return step, limits


def _prefill_pair_time(values: Mapping[str, float], layers: int, attention_flops: float) -> float | None:
    """Time of one causal (query, key) pair of a prompt on one GPU: ``2 x prefill_pair_dim`` flop per
    head (the pack's prefill_attention_flops counts half of them, the masked half) over the GPU's heads
    and layers; None when the pack did not say (the decode pair's cost then stands in)."""
    if "prefill_pair_dim" not in values or "attention_heads" not in values or attention_flops <= 0:
        return None
    heads = values["attention_heads"] / values["tp"]
    return 2 * values["prefill_pair_dim"] * heads * layers / attention_flops


def _speculation(values: Mapping[str, float], get: Any) -> Speculation | None:
    """The draft's costs from the pack's speculation inputs (``draft_tokens`` 0: None), as the pack's
    ``t_draft_step`` charges them: its weights at the target's precision split over tp x pp, its layers'
    share of the KV read, 2 flop per draft parameter per token, and per draft layer the target's fixed
    cost per layer plus two all-reduce latencies when tp > 1."""
    k = round(get("draft_tokens"))
    if k < 1:
        return None
    shards = values["tp"] * get("pp")
    draft_params = get("draft_params") + get("mtp_layers") * values.get("active_params", 0.0) / values["layers"]
    draft_layers = get("draft_layers") + get("mtp_layers")
    bw = values["hbm_bandwidth"]
    per_layer = values["t_fixed"] / values["layers"]
    if values["tp"] > 1:
        per_layer += 2 * values.get("allreduce_latency", 0.0)
    return Speculation(
        draft_tokens=k,
        acceptance_rate=get("acceptance_rate"),
        weights_time=draft_params * values.get("weight_bytes", 0.0) / shards / bw,
        kv_time_per_token=draft_layers / values["layers"] * values["kv_per_token"] / bw,
        token_time=2 * draft_params / shards / (values["peak_flops"] * values["flops_fraction"]),
        fixed=draft_layers * per_layer,
        efficiency=values["efficiency"],
    )


_FLEET_ONLY = ("arrival_rate", "request_rate", "replicas", "concurrency", "batch", "in_flight", "fleet_gpus")
_TARGETS = (
    "t_step",
    "kv_blocks",
    "batch_cap",
    "prefill_time",
    "attention_flops",
    "peak_flops_attention",
    "peak_flops_bf16",
    "prefill_gemm_params_per_gpu",
    "prefill_pair_dim",
    "weights_read",
    "t_comm",
    "t_comm_latency",
    "t_comm_per_token",
    "token_budget",
    "expert_read_scale",
)


def _engine_given(model: Any, name: str) -> bool:
    """Whether ``name`` describes the configuration (not the fleet's load, size or targets)."""
    if name in model.presets:
        return True
    var = model.variables.get(name)
    return var is not None and var.limit is None and name not in _FLEET_ONLY and not name.endswith("_slo")


def solve_engine(given: Mapping[str, Any], **override: Any) -> tuple[StepModel, EngineLimits, dict[str, float]]:
    """Solve ``llm_fleet`` for one configuration (``given``: model, gpu, tp, dtypes, engine, input and
    output tokens; fleet-level names and SLAs are ignored) and adapt it; also returns the values."""
    require_draft_cost(given)  # a simulated draft costs what the question says, never nothing by default
    model = build_model(["llm_fleet"])
    question = {k: v for k, v in given.items() if _engine_given(model, k)}
    question["concurrency"] = "1 request"
    if "kv_fit" in model.variables:
        question.setdefault("kv_fit", "ignore")  # the simulator holds requests to the pool itself, per request
    givens = resolve_givens(model, question)
    targets = tuple(t for t in _TARGETS if t in model.variables and t not in givens.values)
    # an engine setting no preset gave (token_budget without engine=) takes the pack's default, as a solve does
    table = pack_defaults(model)
    defaults = {t: table[t] for t in targets if t in table}
    targets = tuple(t for t in targets if t not in defaults)
    if "spec_tokens_per_step" in givens.values and "acceptance_rate" not in givens.values:
        targets += ("acceptance_rate",)  # a measured mean acceptance length: the pack finds the rate
    known = {**defaults, **givens.values}
    _plan, env, _ = run_question(model, known, targets, givens.sources, trace=False)
    step, limits = engine_from_values(env, **override)
    return step, limits, dict(env)
