"""The one table that says an engine error's remedy in the command line's words.

Below the CLI an error carries data -- ``variable``, ``missing``, ``kind`` (:class:`concur.errors.
ConcurError`) -- and a hint in words of no interface ("give it or ask for it, not both"): a
Python caller of :func:`concur.solve` has no ``--set`` to type. Here, at the face, each ``kind``
becomes the ``--set``/``--find``/``--over`` that fixes it, for the one-line report
(:mod:`concur.cli.report`) and for the web page's field errors (:mod:`concur.cli.web.questions`,
which shows the same line).

Invariants: :func:`for_cli` rewords an error at most once (a reworded error says so in its
``kind``) and never changes its message, class, variable or exit code; an error whose kind is
not in :data:`HINTS` keeps its hint.

Worked example: the solver's ``'users' is both given and asked for`` (kind ``given_and_asked``,
hint "give it or ask for it, not both") is printed ``...; drop --set users=... or --find users``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConcurError, UnderdeterminedError

__all__ = ["HINTS", "SCENARIO_HINT", "for_cli"]

_CLI = "cli:"  # the kind of an error already reworded here


def _sets(names: tuple[str, ...] | list[str]) -> str:
    return " ".join(f"--set {n}=..." for n in names)


def _missing(exc: ConcurError) -> tuple[str, ...]:
    return exc.missing if isinstance(exc, UnderdeterminedError) else ()


def _joined(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


HINTS: dict[str, Callable[[ConcurError], str | None]] = {
    # a value both given and asked for (solver.question)
    "given_and_asked": lambda e: f"drop --set {e.variable}=... or --find {e.variable}",
    # a given count a rounding asks more or fewer of (solver.run): "give X of at least N, or ask for it"
    "ask_for": lambda e: f"{e.hint} (--find {e.variable})",
    # a fallback preset's choice whose source is asked for and cannot follow it (solver.question): field is the preset
    "asked_fallback": lambda e: f"give --set {e.field}=ID (or --set {e.variable}=...)",
    # a price the chosen provider does not list (solver.question)
    "unlisted_price": lambda e: (
        f"give --set {e.variable}=... (your own price) or --set provider=NAME (one that lists it)"
    ),
    # a throughput question whose inputs are neither given nor swept (solver.throughput_inputs)
    "unfixed_inputs": lambda e: _joined(e.hint, f"give {_sets(_missing(e))} (or sweep one with --over)"),
    # values a question needs and lacks (analysis.fleet_plan): "give NAME, NAME"
    "missing": lambda e: f"give {_sets(_missing(e))}",
    # an example of a value to give: "e.g. NAME='2 s'"
    "set_example": lambda e: f"e.g. --set {(e.hint or '').removeprefix('e.g. ')}",
    # a value the engine needs given: the hint names it and why
    "give": lambda e: f"--set {(e.hint or '').removeprefix('give ')}",
    # a simulator question without its configuration (analysis.step_model)
    "give_config": lambda e: "give the model, gpu, tp, dtypes and engine (--set model=... gpu=...)",
    # TP values under 1 (analysis.fleet_axes)
    "tp_values": lambda e: "e.g. --tp 1,2,4,8",
    # an axis of the fleet plan given as a value (analysis.fleet_plan)
    "axis_given": lambda e: (
        "narrow the axis instead: --gpus, --tp, --layouts, --weight-dtypes, --kv-dtypes, --engines, --provider"
        + (" (a disaggregated row's prefill pool: --prefill-gpus)" if e.message.startswith("prefill_gpu") else "")
    ),
    # a price for a prefill pool on another GPU type, and the plan has none (analysis.prefill_prices)
    "prefill_price_unused": lambda e: (
        "add --modes agg,disagg --prefill-gpus ID (a GPU type other than the --gpus one), "
        f"or drop --set {e.variable}=..."
    ),
    # one price for prefill pools on several GPU types (analysis.prefill_prices)
    "prefill_price_types": lambda e: (
        "name one GPU type besides the decode GPUs in --prefill-gpus (one plan per priced type), "
        f"or drop --set {e.variable}=... to price each at its list price"
    ),
    # speculation given by hand while the plan's spec axis would set it too (analysis.fleet_plan)
    "spec_given": lambda e: (
        "plan your own speculation with --set alone (--spec off), or drop it and let --spec on use the catalog's"
    ),
    # a variable both swept and given (sweep.vector)
    "swept_and_given": lambda e: f"drop --set {e.variable}=...",
    # a sweep with no axis (sweep.vector)
    "no_axis": lambda e: "e.g. --over concurrency=1..256:20",
    # a grid over the point cap (sweep.vector)
    "too_many_points": lambda e: (
        "use fewer points per --over (START..STOP:N), fewer --over or --compare values, or split the sweep"
    ),
    # a numeric sweep over its budget (sweep.vector)
    "fewer_swept": lambda e: "use fewer --over values, or ask for an output with a closed form",
    # a value a workbook needs that the solution lacks (excel.from_solution)
    "give_it": lambda e: "give it with --set",
}

SCENARIO_HINT = "or start from the embedded scenario: --scenario default --set NAME=VALUE"


def for_cli(exc: ConcurError, *, scenario_hint: bool = False) -> ConcurError:
    """``exc`` with its hint in the command line's words (:data:`HINTS`, by its ``kind``); with
    ``scenario_hint``, an underdetermined question also says how to start from the packs' embedded
    scenario. Returns ``exc`` itself, reworded in place (its message, class and code unchanged)."""
    kind = exc.kind or ""
    if kind.startswith(_CLI):
        return exc
    word = HINTS.get(kind)
    hint = word(exc) if word is not None else exc.hint
    if scenario_hint and isinstance(exc, UnderdeterminedError) and kind != "unfixed_inputs":
        hint = _joined(hint, SCENARIO_HINT)
    if hint != exc.hint:
        exc.reword(hint)
    exc.kind = _CLI + kind
    return exc
