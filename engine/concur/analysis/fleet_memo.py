"""A fleet plan computed once: remembered in the cache folder, so exporting the fleet workbook
again does not size every configuration again.

The Plan sheet of ``workbooks/llm_fleet.yaml`` compares 168 configurations; sizing them is about
a third of the export. The same question, narrowed the same way, gives the same plan until concur,
a pack or a catalog changes, so the plan is kept on disk (:mod:`concur.cache`: JSON, authenticated
with the user's key kept outside the folder) and read back.

Invariants:

* An entry's name and dependencies follow :mod:`concur.lang.remembered`: the question, the axes
  and the number of candidates confirmed (as JSON, keys sorted), concur's own code, the solve
  budget's settings and what decides which file a name resolves to; its payload lists every pack
  and catalog file the plan read with the sha256 of its bytes, so an edited price or pack is a miss.
* A plan whose confirmation ran out of wall-clock time (a note says "not confirmed by the solver")
  is not remembered: that depends on the machine's load, not on the inputs.
* A missing, stale, unreadable or forged entry costs the computation, never a different plan; a
  plan read back equals the one computed (every field of every candidate, in order).

Non-goal: sharing entries with ``concur plan`` (its progress bar and extra axes take another path).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any

from ..cache import cache_dir, read_json, write_json
from ..lang.library import recording
from ..lang.remembered import deps_of, inputs_key, unchanged
from .fleet_plan import Candidate, Config, FleetPlan, plan_fleet

__all__ = ["KIND", "plan_fleet_once"]

KIND = "fleet-plan"
_UNCONFIRMED = "not confirmed by the solver"  # fleet_plan's note when the wall-clock budget ran out


def plan_fleet_once(
    question: Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]],
    *,
    confirm: int = 3,
    modes: Sequence[str] = ("agg",),
    prefill_gpus: Sequence[str] = (),
) -> FleetPlan:
    """:func:`concur.analysis.fleet_plan.plan_fleet` of ``question`` over ``axes`` (and its ``modes``
    and ``prefill_gpus``), read from the cache folder when this question was planned before with the
    same inputs (see the module essay)."""
    key = _key(question, axes, confirm, (tuple(modes), tuple(prefill_gpus)))
    path = cache_dir() / "fleet" / f"{key[:40]}.json"
    hit = read_json(path, KIND, _decode)
    if hit is not None and unchanged(hit[0]):
        return hit[1]
    with recording() as reads:
        result = plan_fleet(question, axes, confirm=confirm, modes=modes, prefill_gpus=prefill_gpus)
    if not any(_UNCONFIRMED in note for note in result.notes):
        write_json(path, KIND, {"deps": sorted(reads), "plan": _encode(result)})
    return result


def _key(question: Mapping[str, Any], axes: Mapping[str, Sequence[Any]], confirm: int, pools: tuple[Any, ...]) -> str:
    """The entry's name; ``pools`` (modes, prefill GPUs) joins it only when not the aggregated default, so
    an aggregated plan keeps the name it had before the plan had modes."""
    asked_for: list[Any] = [dict(question), {k: list(v) for k, v in axes.items()}, confirm]
    if pools != (("agg",), ()):
        asked_for.append([list(p) for p in pools])
    asked = json.dumps(asked_for, sort_keys=True, default=str)
    key = inputs_key(KIND, asked)
    assert key is not None  # None only for named files, and a plan names none
    return key


def _encode(result: FleetPlan) -> dict[str, Any]:
    return {
        "question": result.question,
        "candidates": [asdict(c) for c in result.candidates],
        "notes": list(result.notes),
        "arrival_rate": result.arrival_rate,
        "output_tokens": result.output_tokens,
    }


def _decode(payload: Any) -> tuple[list[tuple[str, str]], FleetPlan]:
    """(the files read, the plan); raises on anything but what :func:`_encode` writes."""
    deps = deps_of(payload)
    raw = payload["plan"]
    config_fields = {f.name for f in fields(Config)}
    candidates = []
    for entry in raw["candidates"]:
        entry = dict(entry)
        config = dict(entry.pop("config"))
        if set(config) != config_fields or set(entry) != {f.name for f in fields(Candidate)} - {"config"}:
            raise TypeError("a candidate of another shape")
        candidates.append(Candidate(Config(**config), **entry))
    question = raw["question"]
    notes = raw["notes"]
    if not isinstance(question, dict) or not all(isinstance(n, str) for n in notes):
        raise TypeError("not a fleet plan")
    return deps, FleetPlan(question, candidates, list(notes), float(raw["arrival_rate"]), float(raw["output_tokens"]))
