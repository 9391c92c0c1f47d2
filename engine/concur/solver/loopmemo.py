"""Torn loops solved before, remembered across processes: a warm question skips its search.

An integer-torn loop (``replicas = ceil(in_flight / (per_replica * utilization))`` with
``in_flight`` depending on ``replicas``) is solved by an integer search whose every probe solves
an inner torn loop with a bracketed root: thousands of evaluations, most of the README's
headline question. The outcome is a pure function of the packs' content (``model.key``), the
compiled question (``plan.key``), the loop, the values it reads and concur's own code, so it is
kept in the cache folder (:mod:`concur.cache`) under the digest of all of these.

Invariants:

* Kept: the values the loop computed and its trace steps, exactly (floats round-trip through
  JSON's ``repr``), so a hit answers byte for byte what the search would; and that a torn loop
  has no admissible root, with its refusal's text (like the in-process memo, which keeps the
  refusal itself). Any other failure is not kept.
* Entries are HMAC-authenticated with the user's key kept outside the cache folder, and the
  payload is validated field by field: a forged, moved, stale or corrupt entry is a miss (the
  search runs), never a different answer.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..cache import cache_dir, digest, read_json, source_digest, write_json
from .plan import Method, Step

__all__ = ["MAX_WRITES", "MIN_TRIALS", "entry_key", "recall", "remember", "remember_no_root"]

_KIND = "loop"
MIN_TRIALS = 32  # a loop solved in fewer inner solves is cheaper to solve than to read back
MAX_WRITES = 256  # entries one process writes at most
_WRITES = 0
_METHODS = {m.value: m for m in Method}


def entry_key(
    model_key: str, plan_key: tuple[Any, ...], equations: tuple[int, ...], inputs: list[Any], tracing: bool
) -> str | None:
    """The entry's name for this loop of this question on these values (traced or not: an entry
    made without tracing holds no steps); None when a part of the key has no stable text."""
    _, known, targets, folds, relax = plan_key
    try:
        shape = json.dumps(
            [sorted(known), list(targets), list(folds), sorted(relax), list(equations), inputs, tracing],
            allow_nan=True,
        )
    except (TypeError, ValueError):
        return None
    return digest(_KIND, source_digest(), model_key, shape)


def _decode(payload: Any) -> tuple[dict[str, float], list[Step]] | str:
    if "no_root" in payload:
        message = payload["no_root"]
        if not isinstance(message, str):
            raise TypeError("a refusal is text")
        return message
    values = payload["values"]
    if not isinstance(values, dict) or not all(isinstance(v, float) for v in values.values()):
        raise TypeError("values are not floats")
    steps = []
    for var, value, method, eq, note, choice in payload["steps"]:
        if not (isinstance(var, str) and isinstance(value, float) and math.isfinite(value) and isinstance(note, str)):
            raise TypeError("a malformed step")
        if not (eq is None or type(eq) is int) or not (choice is None or type(choice) is int):
            raise TypeError("a malformed step")
        steps.append(Step(var, value, _METHODS[method], eq, note, choice))
    return {str(k): v for k, v in values.items()}, steps


def recall(key: str, variables: tuple[str, ...]) -> tuple[dict[str, float], list[Step]] | str | None:
    """The values (of the loop's ``variables`` only) and steps remembered under ``key``, or the text
    of the refusal of a torn loop that has no root; None when there is no genuine entry."""
    kept = read_json(cache_dir() / "loops" / f"{key[:40]}.json", _KIND, _decode)
    if kept is None or (not isinstance(kept, str) and not set(kept[0]) <= set(variables)):
        return None
    return kept


def remember_no_root(key: str, message: str, trials: int) -> None:
    """Keep that a torn loop has no admissible root on these values, and its refusal's text (the
    rest of the refusal, where and which variable, is rebuilt from the plan)."""
    global _WRITES
    if trials >= MIN_TRIALS and _WRITES < MAX_WRITES:
        _WRITES += 1
        write_json(cache_dir() / "loops" / f"{key[:40]}.json", _KIND, {"no_root": message})


def remember(key: str, values: dict[str, float], steps: list[Step], trials: int) -> None:
    """Keep a loop's outcome (values in base units, its trace steps) under ``key`` when it cost at
    least :data:`MIN_TRIALS` inner solves, and at most :data:`MAX_WRITES` entries per process (a
    sweep over a cheap loop must not fill the folder)."""
    global _WRITES
    if trials < MIN_TRIALS or _WRITES >= MAX_WRITES:
        return
    if not all(isinstance(v, float) for v in values.values()) or not all(isinstance(s.value, float) for s in steps):
        return  # only plain floats round-trip exactly
    _WRITES += 1
    payload = {
        "values": values,
        "steps": [[s.variable, s.value, s.method.value, s.eq, s.note, s.choice] for s in steps],
    }
    write_json(cache_dir() / "loops" / f"{key[:40]}.json", _KIND, payload)
