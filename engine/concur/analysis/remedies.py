"""Remedies for a full KV pool (topic T3): what each one buys, found by re-solving the scenario.

How it is designed, and why
---------------------------
A capacity-bound server has its batch capped by KV-cache memory while the compute units wait
(``concur diagnose`` names that signature). Six changes make room, and they differ wildly in
cost, so the answer is a ranked table -- cheapest first -- with, for each change, the users it buys.
Nothing here is a rule of thumb: each row is the *scenario with one change applied*, solved again
by :func:`concur.solver.question.solve_model` on the ``llm_throughput`` pack (which uses ``llm_memory``),
so the numbers move with every catalog value and every equation of the packs.

The six, in cost order (topic T3, docs/t3-full-kv-pool.md):

1. per-request reservation from the product's real context (``--real-context``), not the model's
   maximum: a configuration flag (vLLM ``--max-model-len``);
2. fp8 KV cache (``kv_dtype=fp8``): a flag, halves ``kv_per_token``; check accuracy;
3. higher memory utilization (``mem_util``, 0.95 by default): a flag, less headroom;
4. prefix caching / shorter prompts (``--shared-prefix``): tokens every request shares are stored
   once, so a user costs ``context - prefix`` and the pool loses one copy of the prefix
   (``llm_memory``'s ``shared_prefix``; sliding-window layers keep only their window), and its
   prefill computes only the uncached part of the prompt (``llm_throughput``'s ``prefill_tokens``,
   at ``prefix_hit_rate``), which the tok/s column counts;
5. fp8 weights (``weight_dtype=fp8``): frees half the weight memory; a quantised checkpoint and
   an accuracy evaluation;
6. more GPUs per replica (the next TP that divides the attention heads) -- watching KV-head
   replication past ``kv_heads`` and MLA's latent replicated on every rank -- or a larger GPU.

Worked example: Llama-3.1-70B, TP4, bf16, H100-80GB, mem_util 0.90, 4 GiB overhead, 8,192-token
reservation: 55 users. Real context 4,096: 110; fp8 KV: 110; mem_util 0.95: 61; a shared
2,048-token prefix: 73; fp8 weights: 81; TP8: 162 (on twice the GPUs: 20.25 per GPU against
13.75); H200: 142.

Consequences: a remedy that does not apply (already fp8, no real context given, TP already at
the largest divisor) is listed with the reason instead of a number, so the table always has the
six rows. Non-goals: the accuracy cost of fp8 and the latency cost of more users are stated as
caveats, not modelled; combinations of remedies are one ``concur solve`` away.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InfeasibleError, UsageError
from ..lang.library import get_catalog
from ..lang.model import build_model
from ..solver.givens import resolve_givens
from ..solver.question import solve_model

__all__ = ["Remedy", "Scenario", "remedies", "throughput_model"]


@dataclass(frozen=True)
class Scenario:
    """What one configuration gives: users per replica and per GPU, optional decode throughput."""

    users: int
    gpus: int
    kv_tokens: float
    tokens_per_s: float | None = None  # served output per replica at concurrency = users (prompts included)
    tokens_per_s_per_gpu: float | None = None

    @property
    def users_per_gpu(self) -> float:
        return self.users / self.gpus if self.gpus else 0.0


@dataclass(frozen=True)
class Remedy:
    """One row: ``rank`` (1 = cheapest), the change, its cost and caveat, and the re-solved result
    (``result`` None with ``reason`` when it does not apply)."""

    rank: int
    name: str
    change: dict[str, Any]
    cost: str
    caveat: str
    result: Scenario | None
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    def to_json(self, base: Scenario) -> dict[str, Any]:
        out = {
            "rank": self.rank,
            "name": self.name,
            "change": self.change,
            "cost": self.cost,
            "caveat": self.caveat,
            "applies": self.result is not None,
        }
        if self.result is not None:
            out.update(asdict(self.result))
            out["users_per_gpu"] = self.result.users_per_gpu
            out["users_gained"] = self.result.users - base.users
        else:
            out["reason"] = self.reason
        return out


def throughput_model() -> Any:
    """The ``llm_throughput`` model every remedy is re-solved on (built once per process, cached by content)."""
    return build_model(["llm_throughput"])


def evaluate(given: dict[str, Any]) -> Scenario:
    """Solve ``given`` for users (and throughput at that concurrency when input/output tokens are
    given), every number from the packs. A model that does not fit gives 0 users."""
    model = throughput_model()
    g = {k: v for k, v in given.items() if k != "concurrency"}
    try:
        sol = solve_model(model, ("users", "kv_tokens", "gpus"), g)
    except InfeasibleError:
        sol = None
    if sol is None:
        gpus = int(float(g.get("tp", 1)) * float(g.get("pp", 1)))
        return Scenario(0, gpus, 0.0)
    users, kv_tokens, gpus = int(sol.value("users")), sol.value("kv_tokens"), int(sol.value("gpus"))
    tps = tpg = None
    if users and "input_tokens" in g and "output_tokens" in g:
        try:
            t = solve_model(model, ("tokens_per_s", "tokens_per_s_per_gpu"), {**g, "concurrency": users})
            tps, tpg = t.value("tokens_per_s"), t.value("tokens_per_s_per_gpu")
        except InfeasibleError:
            pass
    return Scenario(users, gpus, kv_tokens, tps, tpg)


def _value(given: dict[str, Any], name: str) -> Any:
    """A resolved given (presets expanded) in its display unit; choice variables as their names."""
    model = throughput_model()
    g = resolve_givens(model, {k: v for k, v in given.items() if k != "concurrency"})
    if name not in g.values:
        var = model.variables[name]
        return (
            var.choices[int(var.default)]
            if var.choices and var.default is not None
            else (None if var.default is None else var.default / var.display.factor)
        )
    var = model.variables[name]
    return var.choices[int(g.values[name])] if var.choices else g.values[name] / var.display.factor


def remedies(
    given: dict[str, Any],
    *,
    real_context: float | None = None,
    shared_prefix: float | None = None,
    mem_util: float = 0.95,
    larger_gpu: str | None = None,
) -> tuple[Scenario, list[Remedy]]:
    """The baseline and the six remedies (seven rows: 6 has a TP and a larger-GPU variant), cheapest first.

    ``given``: an ``llm_memory`` scenario (model/gpu/tp/dtypes/context/...), optionally with
    ``input_tokens``/``output_tokens`` for throughput. ``real_context``: the tokens a request
    really holds (token); ``shared_prefix``: tokens every request shares (token); ``larger_gpu``:
    a GPU id (default: the next larger in the catalog). Raises ``UsageError`` for a bad scenario.
    """
    for flag, value in (("--real-context", real_context), ("--shared-prefix", shared_prefix)):
        if value is not None and not math.isfinite(value):  # inf read as 'no larger than', nan as 'not in range'
            raise UsageError(f"{flag} must be a finite number of tokens, got {value:g}")
    if "context" not in given:
        raise UsageError(
            "remedies need the per-request reservation",
            variable="context",
            hint="give context=8192 (the engine's max-model-len)",
            kind="give",
        )
    base = evaluate(given)
    out: list[Remedy] = []
    context = float(_value(given, "context"))

    def row(rank: int, name: str, change: dict[str, Any], cost: str, caveat: str, reason: str = "") -> None:
        res = None if reason else evaluate({**given, **change})
        out.append(Remedy(rank, name, change, cost, caveat, res, reason))

    # 1. real context
    reason = ""
    if real_context is None:
        reason = "give --real-context (the longest prompt + output the product really sends)"
    elif real_context >= context:
        reason = f"the reservation ({context:g} token) is already no larger than the real context"
    row(
        1,
        "size max-model-len from the real context",
        {} if reason else {"context": real_context},
        "free (one flag: --max-model-len)",
        "requests longer than the new limit are refused",
        reason,
    )
    # 2. fp8 KV
    kv = _value(given, "kv_bytes")
    row(
        2,
        "fp8 KV cache",
        {"kv_dtype": "fp8"},
        "free (one flag: --kv-cache-dtype fp8)",
        "small accuracy loss on long contexts: evaluate on your task",
        "KV cache is already 1 byte or less" if kv is not None and kv <= 1 else "",
    )
    # 3. mem_util
    cur = float(_value(given, "mem_util"))
    row(
        3,
        f"raise mem_util to {mem_util:g}",
        {"mem_util": mem_util},
        "free (one flag: --gpu-memory-utilization)",
        "less headroom: activation spikes or other processes on the GPU can OOM",
        "" if mem_util > cur else f"mem_util is already {cur:g}",
    )
    # 4. prefix caching
    reason = ""
    if shared_prefix is None:
        reason = "give --shared-prefix (system prompt / few-shot tokens every request shares)"
    elif not 0 < shared_prefix < context:
        reason = f"--shared-prefix must lie between 0 and the context {context:g}"
    elif "input_tokens" in given and shared_prefix >= float(_value(given, "input_tokens")):
        reason = (
            f"--shared-prefix must be shorter than the prompt (input_tokens {float(_value(given, 'input_tokens')):g})"
        )
    row(
        4,
        "prefix caching / shorter prompts",
        {} if reason else {"shared_prefix": f"{shared_prefix!r} token"},
        "engineering (enable prefix caching; restructure prompts)",
        "only a prefix identical across requests is shared; a cache miss costs a full prefill",
        reason,
    )
    # 5. fp8 weights
    wb = _value(given, "weight_bytes")
    row(
        5,
        "fp8 weights",
        {"weight_dtype": "fp8"},
        "an fp8 checkpoint and an accuracy evaluation",
        "quantisation error: evaluate; needs FP8 support (Hopper or newer) to be fast",
        "weights are already 1 byte or less" if wb is not None and wb <= 1 else "",
    )
    # 6a. more GPUs per replica
    tp = int(float(_value(given, "tp")))
    heads = _value(given, "attention_heads")
    kv_heads = _value(given, "kv_heads")
    attention = _value(given, "attention")
    nxt = None
    if heads is not None:
        nxt = next((t for t in range(tp + 1, int(heads) + 1) if int(heads) % t == 0), None)
    caveat = "twice the GPUs per replica (compare users per GPU); more all-reduce per step"
    if attention == "mla":
        caveat = "MLA latent is replicated on every TP rank: more GPUs free weight memory only"
    elif nxt is not None and kv_heads is not None and nxt > kv_heads:
        caveat = (
            f"tp {nxt} > kv_heads {int(kv_heads)}: KV heads are replicated, so per-GPU KV per "
            "token stops shrinking and users per GPU fall"
        )
    row(
        6,
        f"more GPUs per replica (tp {tp} -> {nxt})" if nxt else "more GPUs per replica",
        {"tp": nxt} if nxt else {},
        f"{nxt // tp if nxt and nxt % tp == 0 else nxt}x the GPUs per replica" if nxt else "hardware",
        caveat,
        "" if nxt else "no larger tensor-parallel degree divides the attention heads",
    )
    # 6b. a larger GPU
    gpus = get_catalog("gpus")
    mem = float(_value(given, "gpu_memory") or 0)
    reason = ""
    if larger_gpu is None:
        bigger = sorted(
            (float(e.values["gpu_memory"][0]), gid)
            for gid, e in gpus.entries.items()
            if "gpu_memory" in e.values and float(e.values["gpu_memory"][0]) > mem + 1e-9
        )
        larger_gpu = bigger[0][1] if bigger else None
        reason = "" if larger_gpu else "no GPU in the catalog has more memory"
    row(
        6,
        f"a larger GPU ({larger_gpu})" if larger_gpu else "a larger GPU",
        {"gpu": larger_gpu} if larger_gpu else {},
        "new hardware (same GPU count)",
        "different bandwidth and FLOP/s: re-check the throughput curve",
        reason,
    )
    return base, out
