"""The rate an engine's MLA prefill attention kernel runs at, per GPU family, from silicon measurements.

A prompt's causal attention costs ``2 x prefill_pair_dim`` flop per head for every (query, key) pair,
half of them masked; formulas/llm_throughput.yaml charges those FLOPs at the BF16 peak x
flops_fraction x efficiency_prefill (every measured MLA prefill kernel computes in BF16, FP8 KV
cache or not). The engines' kernels do not all reach it: SGLang runs DeepSeek-V3's expanded MLA
prefill on Hopper through FlashAttention (query-key head dim 192, value 128) at about a third of
what TensorRT-LLM's and vLLM's kernels (FlashMLA) reach on the same GPU, while on Blackwell it runs
TensorRT-LLM's kernel. ``mla_prefill_rate_<family>`` (per engine) is that measured rate over the
pack's, for the GPU families with measurements (:data:`MLA_FAMILIES`); elsewhere the pack keeps the
BF16 peak (rate 1).

One measured row (``tests/data/attention_kernels.yaml``: one prompt of ``L`` tokens, ``h`` heads on
one GPU, one layer)::

    flops = h x (qk_head_dim + v_head_dim) x L^2        (the pack's prefill_attention_flops per layer)
    rate  = flops / latency / (peak_flops_bf16 x flops_fraction x efficiency_prefill)

Each engine's rate on a family is the median (of the logs) over its rows on that family's GPUs, every
length (4,096 to 16,384 tokens: the kernels run at about 0.6x of their long-prompt rate at 4,096 and a
little above it at 16,384, so the median is the 8,192-token rate); ``default``'s is over every
engine's rows. Invariant: every rate is positive and the pack divides only MLA models' prefill
attention time by it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..lang.library import get_catalog
from ..lang.yamlsafe import load_yaml
from .moe_kernels import gpu_value, log_median

__all__ = [
    "ATTENTION_KERNELS_LABEL",
    "MLA_FAMILIES",
    "AttentionRow",
    "MlaPrefillFit",
    "attention_rows",
    "fit_mla_prefill",
]

ATTENTION_KERNELS_LABEL = "tests/data/attention_kernels.yaml"
MLA_FAMILIES = ("hopper", "blackwell")  # the families with an mla_prefill_rate_<family> field in the packs


@dataclass(frozen=True)
class AttentionRow:
    """One measured MLA prefill kernel: who ran it, where, and its rate over the pack's."""

    engine: str
    gpu: str
    family: str
    kernel: str
    prompt_tokens: int
    rate: float


@dataclass(frozen=True)
class MlaPrefillFit:
    """``rates[(engine, family)]`` (engine ``default``: every engine's rows), ``n`` the rows behind each,
    ``kernels`` the kernels each ran; ``error`` the median |log| of fitted over measured rate, in sample;
    ``held_out`` the same with each GPU's rows predicted from the family's other GPUs (NaN where a
    family has one GPU only)."""

    rates: dict[tuple[str, str], float]
    n: dict[tuple[str, str], int]
    kernels: dict[tuple[str, str], tuple[str, ...]]
    error: float
    held_out: float

    def rate(self, engine: str, family: str) -> float:
        """The engine's rate on ``family`` (``default``'s where the engine has no rows there; 1 where nothing does)."""
        return self.rates.get((engine, family), self.rates.get(("default", family), 1.0))


def attention_rows(path: str | Path, efficiency_prefill: float) -> list[AttentionRow]:
    """Every measured row with its rate over the pack's MLA prefill attention on that GPU.

    Raises ValueError for a row on a GPU family the packs have no mla_prefill_rate field for."""
    data = load_yaml(Path(path))
    pair_dim = float(data["shape"]["qk_head_dim"]) + float(data["shape"]["v_head_dim"])
    gpus = get_catalog("gpus")
    out = []
    for row in data["rows"]:
        gpu = gpus.entries[row["gpu"]]
        family = str(gpu.values["family"][0])
        if family not in MLA_FAMILIES:
            raise ValueError(
                f"{path}: row on {row['gpu']} ({family}): the packs have mla_prefill_rate fields for "
                f"{', '.join(MLA_FAMILIES)} only; add one for {family} first"
            )
        flops = float(row["heads_per_gpu"]) * pair_dim * float(row["prompt_tokens"]) ** 2
        pack = gpu_value(gpu, "peak_flops_bf16") * gpu_value(gpu, "flops_fraction", 1.0) * efficiency_prefill
        out.append(
            AttentionRow(
                engine=str(row["engine"]),
                gpu=str(row["gpu"]),
                family=family,
                kernel=str(row["kernel"]),
                prompt_tokens=int(row["prompt_tokens"]),
                rate=flops / (float(row["latency_ms"]) * 1e-3) / pack,
            )
        )
    return out


def _groups(rows: Sequence[AttentionRow]) -> dict[tuple[str, str], list[AttentionRow]]:
    out: dict[tuple[str, str], list[AttentionRow]] = {}
    for r in rows:
        out.setdefault((r.engine, r.family), []).append(r)
        out.setdefault(("default", r.family), []).append(r)
    return out


def fit_mla_prefill(path: str | Path, efficiency_prefill: float) -> MlaPrefillFit:
    """The engines catalog's ``mla_prefill_rate_<family>`` per engine from the measured rows, with the
    in-sample and leave-one-GPU-out median errors."""
    rows = attention_rows(path, efficiency_prefill)
    groups = _groups(rows)
    rates = {key: round(log_median([r.rate for r in rs]), 3) for key, rs in groups.items()}
    error = statistics.median(abs(math.log(rates[(r.engine, r.family)] / r.rate)) for r in rows)
    held: list[float] = []
    for r in rows:
        others = [o.rate for o in groups[(r.engine, r.family)] if o.gpu != r.gpu]
        if others:
            held.append(abs(math.log(log_median(others) / r.rate)))
    return MlaPrefillFit(
        rates=rates,
        n={key: len(rs) for key, rs in groups.items()},
        kernels={key: tuple(sorted({r.kernel for r in rs})) for key, rs in groups.items()},
        error=error,
        held_out=statistics.median(held) if held else math.nan,
    )
