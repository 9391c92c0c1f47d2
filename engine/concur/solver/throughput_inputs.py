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

One more thing is never assumed: what a speculative draft costs. ``draft_tokens`` > 0 with neither
MTP/EAGLE heads (``mtp_layers``) nor a draft model (``draft_params``, ``draft_layers``) named would
otherwise take the pack's defaults, a draft that costs nothing: the most optimistic speedup, and
only right for an n-gram or prompt-lookup draft, which ``draft_params=0`` says explicitly
(:func:`require_draft_cost`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ..errors import UnderdeterminedError
from ..records import record

__all__ = [
    "DRAFT_COST",
    "FIXED_INPUTS",
    "THROUGHPUT_OUTPUTS",
    "UnfixedThroughputError",
    "require_draft_cost",
    "require_fixed",
]


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

DRAFT_COST = ("mtp_layers", "draft_params", "draft_layers")
"""The names that say what a speculative draft costs (one of them must be given with draft_tokens > 0)."""


def require_fixed(model: Any, fixed: Iterable[str] | Mapping[str, Any], outputs: Sequence[str]) -> None:
    """Refuse a throughput question that leaves one of the four fixed variables open.

    ``model``: a :class:`concur.lang.model.Model`; ``fixed``: the names the user gave, swept or
    compared (presets included), or the givens themselves (name to raw value or swept values), whose
    draft length :func:`require_draft_cost` then also checks; ``outputs``: the names asked for. Applies only when a pack in
    ``model`` is listed in :data:`FIXED_INPUTS` and an output is in :data:`THROUGHPUT_OUTPUTS`.
    Raises :class:`concur.errors.UnderdeterminedError` (exit 2) naming each missing thing (its
    ``missing`` lists the name that fixes each); returns None otherwise.

    >>> from concur.lang.model import build_model
    >>> try:
    ...     given = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "input_tokens": 1000}
    ...     require_fixed(build_model(["llm_throughput"]), given, ["t_step"])
    ... except UnderdeterminedError as exc:
    ...     print(exc.missing)
    ('output_tokens', 'concurrency')
    """
    packs = {p.name for p in model.packs}
    if isinstance(fixed, Mapping) and "llm_throughput" in packs:
        require_draft_cost(fixed)
    if not set(outputs) & THROUGHPUT_OUTPUTS:
        return
    names = set(fixed) | set(outputs)
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


def require_draft_cost(given: Mapping[str, Any]) -> None:
    """Refuse speculative decoding (``draft_tokens`` given, not 0, or swept over a value other than 0)
    whose draft's cost is not given.

    >>> require_draft_cost({"draft_tokens": 3, "mtp_layers": 1})
    >>> require_draft_cost({"draft_tokens": 0})
    >>> require_draft_cost({"draft_tokens": [0, 0]})  # swept, never drafting
    >>> try:
    ...     require_draft_cost({"draft_tokens": "3", "acceptance_rate": 0.7})
    ... except UnderdeterminedError as exc:
    ...     print(exc.missing)
    ('mtp_layers',)
    """
    raw = given.get("draft_tokens")
    array = isinstance(raw, list | tuple) or hasattr(raw, "__array__")  # a sweep's values
    swept: list[Any] = list(cast(Iterable[Any], raw)) if array else [raw]
    try:
        drafting = any(v is not None and float(str(v).split()[0]) != 0 for v in swept)
    except ValueError:
        return  # the solver refuses the value itself
    if drafting and not set(given) & set(DRAFT_COST):
        raise UnfixedThroughputError(
            "speculative decoding's draft has a cost, and concur assumes none: give mtp_layers (MTP or EAGLE "
            "heads on the target: 1), draft_params and draft_layers (a separate draft model), or draft_params=0 "
            "(an n-gram or prompt-lookup draft that costs nothing)",
            missing=("mtp_layers",),
            variable="draft_tokens",
            hint="a free draft is the most optimistic speedup; say which draft runs",
            kind="unfixed_inputs",
        )
