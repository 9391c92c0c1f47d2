"""Speculative decoding in the engine simulator: what a step costs and how many tokens it emits.

How is this designed, and why?
==============================

A speculative step has two parts (the throughput pack's model, ``formulas/llm_throughput.yaml``,
taken apart like :mod:`concur.analysis.step_model` takes apart the decode step):

* the **draft** proposes ``draft_tokens`` (k) tokens per sequence, one autoregressive draft step
  after another; one draft step for a batch of ``n`` sequences whose contexts sum to ``C`` costs
  ``max(weights + kv_time_per_token x C, n x token_time) / efficiency + fixed``: the
  draft's own weights (a separate model's, or ``mtp_layers`` target layers for MTP/EAGLE heads),
  its share of the KV cache (its layers over the target's), 2 flop per draft parameter per token,
  and the kernel launches and all-reduce latencies of its layers;
* the **target** verifies k + 1 tokens per sequence in one step (:meth:`StepModel.time` with
  ``verify = k + 1``): k + 1 tokens' FLOPs and all-reduces, the weights and KV read once.

**Acceptance** is drawn, not averaged: each draft token is accepted independently with
probability ``acceptance_rate`` (alpha) and the step keeps the accepted prefix plus the target's
own token, so a sequence advances ``1 + L`` tokens where ``P(L >= j) = alpha^j`` for ``j <= k``
(Leviathan, Kalman and Matias 2023, arXiv:2211.17192, section 3). Its mean is the pack's
``spec_tokens_per_step``, ``(1 - alpha^(k+1)) / (1 - alpha)``. Draws come from a ``numpy``
generator seeded by the run, so a run is a pure function of its inputs and seed.

Invariant: at ``acceptance_rate`` 0 every step emits exactly one token per sequence and costs at
least the plain decode step (the verification's extra tokens and the draft only add time), so
speculation that is never accepted is never faster than none.

Non-goals: tree drafts (EAGLE's top-k > 1 candidate trees), acceptance that varies along the
output or between requests, drafts on other GPUs than the target's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError

__all__ = ["Speculation"]


@dataclass(frozen=True)
class Speculation:
    """A draft of ``draft_tokens`` per step accepted at ``acceptance_rate``, and the draft's costs (s)."""

    draft_tokens: int
    acceptance_rate: float
    weights_time: float  # reading the draft's weights once (0 for an n-gram draft)
    kv_time_per_token: float  # the draft's KV read per context token (its layers' share of the target's)
    token_time: float  # 2 flop per draft parameter of one token, at peak x flops_fraction
    fixed: float  # kernel launches and all-reduce latencies of the draft's layers, per draft step
    efficiency: float

    def __post_init__(self) -> None:
        if not isinstance(self.draft_tokens, int) or isinstance(self.draft_tokens, bool) or self.draft_tokens < 1:
            raise UsageError(
                f"draft_tokens must be a whole number >= 1, got {self.draft_tokens!r}", variable="draft_tokens"
            )
        if not 0 <= self.acceptance_rate < 1:
            raise UsageError(
                f"acceptance_rate must be in [0, 1), got {self.acceptance_rate!r}", variable="acceptance_rate"
            )

    @property
    def verify(self) -> int:
        """Tokens per sequence the target runs in one step: the drafts and its own."""
        return self.draft_tokens + 1

    @property
    def mean_tokens(self) -> float:
        """Expected tokens one step emits per sequence (the pack's ``spec_tokens_per_step``)."""
        a = self.acceptance_rate
        return float(self.verify) if a >= 1 else (1 - a**self.verify) / (1 - a)

    def draft_time(self, sequences: int, context: float) -> float:
        """The k draft steps of a batch of ``sequences`` whose contexts sum to ``context`` tokens."""
        if sequences <= 0:
            return 0.0
        memory = self.weights_time + self.kv_time_per_token * context
        compute = sequences * self.token_time
        return self.draft_tokens * (max(memory, compute) / self.efficiency + self.fixed)

    def draw(self, rng: Any, sequences: int) -> Any:
        """Tokens each of ``sequences`` sequences advances in one step: 1 + accepted prefix, at most k + 1."""
        import numpy as np

        if self.acceptance_rate <= 0:
            return np.ones(sequences, dtype=np.int64)
        accepted = rng.geometric(1 - self.acceptance_rate, sequences) - 1  # successes before the first rejection
        return 1 + np.minimum(accepted, self.draft_tokens).astype(np.int64)
