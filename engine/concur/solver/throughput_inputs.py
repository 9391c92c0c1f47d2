"""The four fixed variables of a throughput question (docs/t2-throughput.md), as one rule.

A throughput number describes one operating point: a tokens/s figure quoted without its input
length, output length, offered load and configuration could be any of a hundred-fold range
(Llama-3.1-8B on one H100: 205 tok/s at concurrency 1, 6,450 tok/s at 64, from the same
formula). So concur refuses to answer until each is fixed, instead of filling the gap with a
default. ``concur solve``, :func:`concur.solve`, ``concur sweep`` and ``concur diagnose`` all call
:func:`require_fixed`, so the rule and its message live in one place.

A thing counts as fixed when one of its names is given (a value, a preset such as ``model=``,
a swept or compared variable) or is itself asked for: ``--find request_rate --set
concurrency=64`` asks what rate a load of 64 in flight sustains, which is a fixed offered load.
Non-goals: checking the values (the solver and bounds do that) and packs other than those
listed in :data:`FIXED_INPUTS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import UnderdeterminedError
from ..records import record

__all__ = ["FIXED_INPUTS", "THROUGHPUT_OUTPUTS", "UnfixedThroughputError", "require_fixed"]


class UnfixedThroughputError(UnderdeterminedError):
    """A throughput question that leaves one of the four fixed variables open (exit 2)."""


@record
class Need:
    """One thing a throughput question must fix: ``what`` it is, and the names that fix it."""

    what: str  # "input length"
    any_of: tuple[str, ...]  # one of these names (given, swept, a preset, or asked for) fixes it


FIXED_INPUTS: dict[str, tuple[Need, ...]] = {
    "llm_throughput": (
        Need("input length", ("input_tokens",)),
        Need("output length", ("output_tokens",)),
        Need("offered load (concurrency or request_rate)", ("concurrency", "request_rate", "arrival_rate")),
        Need("configuration (model or explicit architecture)", ("model", "active_params", "params")),
        Need("configuration (GPU or explicit hbm_bandwidth)", ("gpu", "hbm_bandwidth")),
    ),
}
"""Per pack, the things a throughput question must fix. A model containing a pack listed here
refuses a throughput question that leaves one of them open."""

THROUGHPUT_OUTPUTS = frozenset(
    {
        "t_step",
        "itl",
        "ttft",
        "latency",
        "tokens_per_s",
        "tokens_per_s_per_user",
        "tokens_per_s_per_gpu",
        "bound_tokens_per_s",
        "served_tokens_per_s",
        "memory_time",
        "compute_time",
        "t_step_bound",
        "request_rate",
    }
)
"""The answers that are throughputs or latencies (and so depend on all four)."""


def require_fixed(model: Any, fixed: Iterable[str], outputs: Sequence[str]) -> None:
    """Refuse a throughput question that leaves one of the four fixed variables open.

    ``model``: a :class:`concur.lang.model.Model`; ``fixed``: the names the user gave, swept or
    compared (presets included); ``outputs``: the names asked for. Applies only when a pack in
    ``model`` is listed in :data:`FIXED_INPUTS` and an output is in :data:`THROUGHPUT_OUTPUTS`.
    Raises :class:`concur.errors.UnderdeterminedError` (exit 2) naming each missing thing (its
    ``missing`` lists the name that fixes each); returns None otherwise.

    >>> from concur.lang.model import build_model
    >>> try:
    ...     require_fixed(build_model(["llm_throughput"]), {"model", "gpu", "input_tokens"}, ["t_step"])
    ... except UnderdeterminedError as exc:
    ...     print(exc.missing)
    ('output_tokens', 'concurrency')
    """
    if not set(outputs) & THROUGHPUT_OUTPUTS:
        return
    names = set(fixed) | set(outputs)
    packs = {p.name for p in model.packs}
    missing: list[Need] = []
    for pack, needs in FIXED_INPUTS.items():
        if pack in packs:
            missing.extend(n for n in needs if not names & set(n.any_of))
    if missing:
        what = "; ".join(n.what if n.any_of[0] in n.what else f"{n.what} ({n.any_of[0]})" for n in missing)
        raise UnfixedThroughputError(
            "a throughput number is meaningless until input length, output length, offered load and the "
            f"configuration are fixed; missing {what}",
            missing=tuple(n.any_of[0] for n in missing),
            hint="concur assumes none of them",
            kind="unfixed_inputs",
        )
