"""A fleet plan computed once: remembered in the cache folder, so exporting the fleet workbook
again does not size every configuration again.

The Plan sheet of ``workbooks/llm_fleet.yaml`` compares 168 configurations; sizing them is about
a third of the export. The same question, narrowed the same way, gives the same plan until concur,
a pack or a catalog changes, so the plan is kept on disk (:mod:`concur.cache`: JSON, authenticated
with the user's key kept outside the folder) and read back.

Invariants:

* An entry's name is the :func:`~concur.cache.digest` of the question, the axes and the number of
  candidates confirmed (as JSON, keys sorted), of concur's own code
  (:func:`~concur.cache.source_digest`), of the solve budget's settings, and of what decides which
  file a pack or catalog name resolves to (the ``*.yaml`` names in the shipped, ``--pack-path``
  and ``CONCUR_CATALOG_PATH`` folders). Its payload lists every pack and catalog file the plan
  read (:func:`concur.lang.library.recording`) with the sha256 of its bytes; an entry is used only
  while every one of them still has those bytes, so an edited price or pack is a miss.
* A plan whose confirmation ran out of wall-clock time (a note says "not confirmed by the solver")
  is not remembered: that depends on the machine's load, not on the inputs.
* A missing, stale, unreadable or forged entry costs the computation, never a different plan; a
  plan read back equals the one computed (every field of every candidate, in order).

Non-goal: sharing entries with ``concur plan`` (its progress bar and extra axes take another path).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from ..cache import cache_dir, digest, read_json, source_digest, write_json
from ..lang.library import catalog_path, formulas_dir, pack_path, recording
from ..lang.yamlsafe import MAX_BYTES
from ..readfile import FileRefused, read_regular
from .fleet_plan import Candidate, Config, FleetPlan, plan_fleet

__all__ = ["KIND", "plan_fleet_once"]

KIND = "fleet-plan"
_UNCONFIRMED = "not confirmed by the solver"  # fleet_plan's note when the wall-clock budget ran out
_SETTINGS = ("CONCUR_SOLVE_BUDGET", "CONCUR_SOLVE_SECONDS", "CONCUR_CATALOG_PATH")


def plan_fleet_once(question: Mapping[str, Any], axes: Mapping[str, Sequence[Any]], *, confirm: int = 3) -> FleetPlan:
    """:func:`concur.analysis.fleet_plan.plan_fleet` of ``question`` over ``axes``, read from the
    cache folder when this question was planned before with the same inputs (see the module essay)."""
    key = _key(question, axes, confirm)
    path = cache_dir() / "fleet" / f"{key[:40]}.json"
    hit = read_json(path, KIND, _decode)
    if hit is not None and _fresh(hit[0]):
        return hit[1]
    with recording() as reads:
        result = plan_fleet(question, axes, confirm=confirm)
    if not any(_UNCONFIRMED in note for note in result.notes):
        write_json(path, KIND, {"deps": sorted(reads), "plan": _encode(result)})
    return result


def _names(folder: Path) -> str:
    try:
        return "\0".join(sorted(n for n in os.listdir(folder) if n.endswith((".yaml", ".yml"))))
    except OSError:
        return ""


def _key(question: Mapping[str, Any], axes: Mapping[str, Sequence[Any]], confirm: int) -> str:
    asked = json.dumps([dict(question), {k: list(v) for k, v in axes.items()}, confirm], sort_keys=True, default=str)
    parts: list[bytes | str] = [KIND, asked, source_digest()]
    parts += [f"{name}={os.environ.get(name, '')}" for name in _SETTINGS]
    shipped = formulas_dir()
    for folder in sorted({str(f) for f in (shipped, shipped / "catalogs", *pack_path(), *catalog_path())}):
        parts += [folder, _names(Path(folder))]
    return digest(*parts)


def _fresh(deps: Iterable[tuple[str, str]]) -> bool:
    """Every file the plan read still has the bytes it had."""
    for file, sha in deps:
        try:
            data = read_regular(file, MAX_BYTES)
        except FileRefused:
            return False
        if hashlib.sha256(data).hexdigest() != sha:
            return False
    return True


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
    deps = [(str(file), str(sha)) for file, sha in payload["deps"]]
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
