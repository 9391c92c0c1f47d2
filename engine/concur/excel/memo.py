"""A workbook definition's plan and printed formulas, remembered: exporting it again imports no sympy.

How is this designed, and why?
------------------------------
Exporting a workbook definition solves its question, builds the workbook plan
(:func:`concur.excel.definition.plan_for`: the closed forms as sympy expressions) and prints
every formula through sympy: importing sympy and that work are about half of exporting the
fleet workbook. The same definition, with the same packs, catalogs and concur, gives the same
plan and the same formulas, so both are kept in the cache folder (:mod:`concur.cache`: JSON,
authenticated with the user's key kept outside the folder): the plan with each expression
replaced by a :class:`Recorded` stand-in (the names it reads, all the sheet writers ask of an
expression besides printing it), and the :class:`~concur.excel.layout.Tape` of what the writer
printed. Exporting again replays the tape over the remembered plan.

Invariants:

* An entry's name and dependencies follow :mod:`concur.lang.remembered`: the definition as read
  (every field of :class:`~concur.excel.definition.WorkbookDefinition`, its resolved path), the
  ``search_up_to`` asked for, concur's own code, the solve budget's settings and what decides
  which file a name resolves to; its payload lists every pack and catalog file read while solving
  and planning with the sha256 of its bytes, and an entry is used only while each still has them.
* A replayed workbook is the recorded one: every cell, formula, style and name
  (``tests/excel/test_workbook_memo.py`` compares the bytes for every shipped definition).
* A missing, stale, unreadable or forged entry costs the sympy path, never a different
  workbook; a tape that does not fit the plan is a :class:`RuntimeError` (a bug, not a user
  error), raised before anything is written.

Non-goals: the fleet plan of a ``plan:`` entry (remembered on its own,
:mod:`concur.analysis.fleet_memo`), workbooks written from ``concur export PACK --find ...``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..cache import cache_dir, read_json, write_json
from ..lang.remembered import deps_of, inputs_key, unchanged
from .layout import Tape
from .plan import Derived, Input, PresetChoice, Root, Scenario, Search, SheetVar, Sweep, WorkbookPlan

__all__ = ["KIND", "Recorded", "recall", "remember"]

KIND = "workbook-plan"


class _Name(NamedTuple):
    name: str


@dataclass(frozen=True)
class Recorded:
    """An expression of a remembered plan: only the names it reads (its ``free_symbols``)."""

    names: tuple[str, ...]

    @property
    def free_symbols(self) -> frozenset[_Name]:
        return frozenset(_Name(n) for n in self.names)


def _key(defn: Any, search_up_to: int | None) -> str | None:
    try:
        asked = json.dumps([asdict(defn), search_up_to], sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
    return inputs_key(KIND, asked, str(Path(defn.path).resolve()))


def _path(key: str) -> Path:
    return cache_dir() / "workbooks" / f"{key[:40]}.json"


def recall(defn: Any, search_up_to: int | None) -> tuple[WorkbookPlan, Tape] | None:
    """The remembered plan (without a fleet comparison) of ``defn`` (a
    :class:`~concur.excel.definition.WorkbookDefinition`, not imported here: it imports this
    module) and a tape replaying its formulas, or None."""
    key = _key(defn, search_up_to)
    if key is None:
        return None
    hit = read_json(_path(key), KIND, _decode)
    if hit is None or not unchanged(hit[0]):
        return None
    return hit[1], Tape(hit[2])


def remember(
    defn: Any, search_up_to: int | None, reads: Iterable[tuple[str, str]], plan: WorkbookPlan, tape: Tape
) -> bool:
    """Keep ``plan`` (its comparison left out) and the recorded ``tape``; False when not written."""
    key = _key(defn, search_up_to)
    if key is None or tape.replaying:
        return False
    try:
        payload = {"deps": sorted(reads), "plan": _encode(plan), "tape": tape.entries}
    except TypeError:  # a value JSON cannot hold: export again next time
        return False
    return write_json(_path(key), KIND, payload)


_EXPRESSIONS = {"expr", "residual", "test", "checks"}  # the sympy fields of the plan's dataclasses


def _encode(value: Any, expression: bool = False) -> Any:
    """JSON data of a plan: dataclasses as field maps (the comparison left out), tuples as lists,
    an expression (a field of :data:`_EXPRESSIONS`) as the names it reads. Anything else is a
    :class:`TypeError`: such a plan is not remembered."""
    if value is None or (isinstance(value, (str, bool, int, float)) and not expression):
        return value
    if expression and not isinstance(value, (list, tuple)):
        return {"reads": sorted(str(s.name) for s in value.free_symbols)}
    if is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _encode(getattr(value, f.name), f.name in _EXPRESSIONS)
            for f in fields(value)
            if f.name != "comparison"
        }
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, expression) for v in value]
    raise TypeError(f"cannot remember {type(value).__name__} in a workbook plan")


def _expr(raw: Any) -> Recorded | None:
    if raw is None:
        return None
    if set(raw) != {"reads"}:
        raise TypeError("not a recorded expression")
    return Recorded(tuple(str(n) for n in raw["reads"]))


def _var(raw: dict[str, Any]) -> SheetVar:
    lo, hi = raw["bounds"]
    return SheetVar(
        str(raw["name"]),
        str(raw["unit"]),
        float(raw["scale"]),
        str(raw["doc"]),
        bool(raw["integer"]),
        (lo, hi),
        tuple(str(c) for c in raw["choices"]),
    )


def _root(raw: dict[str, Any]) -> Root:
    return Root(
        str(raw["variable"]),
        _expr(raw["residual"]),
        raw["slope"],
        tuple(str(b) for b in raw["body"]),
        raw["start"],
        int(raw["fixed_steps"]),
        int(raw["secant_steps"]),
        raw["tolerance"],
    )


def _search(raw: dict[str, Any] | None) -> Search | None:
    if raw is None:
        return None
    return Search(
        _expr(raw["test"]),
        tuple(str(c) for c in raw["columns"]),
        int(raw["low"]),
        int(raw["high"]),
        str(raw["direction"]),
        raw["floor"],
        raw["ceiling"],
        tuple(_expr(c) for c in raw["checks"]),
        bool(raw["skip"]),
        str(raw["about"]),
        tuple(_root(r) for r in raw["roots"]),
    )


def _derived(raw: dict[str, Any]) -> Derived:
    return Derived(
        _var(raw["var"]),
        _expr(raw["expr"]),
        str(raw["equation"]),
        str(raw["where"]),
        raw["value"],
        bool(raw["implicit"]),
        _expr(raw["residual"]),
        _search(raw["search"]),
        raw["solved_in"],
    )


def _plan(raw: dict[str, Any]) -> WorkbookPlan:
    return WorkbookPlan(
        str(raw["title"]),
        str(raw["doc"]),
        [Input(_var(i["var"]), i["value"], i["preset"], str(i["source"])) for i in raw["inputs"]],
        [
            PresetChoice(
                str(p["key"]),
                str(p["catalog"]),
                str(p["selected"]),
                tuple(p["ids"]),
                dict(p["table"]),
                dict(p["sources"]),
                str(p["follows"]),
            )
            for p in raw["presets"]
        ],
        [_derived(d) for d in raw["derived"]],
        [
            Sweep(
                str(s["name"]),
                str(s["over"]),
                tuple(float(v) for v in s["values"]),
                tuple(str(o) for o in s["outputs"]),
                str(s["x"]),
                str(s["y"]),
                str(s["title"]),
                bool(s["log_x"]),
            )
            for s in raw["sweeps"]
        ],
        [Scenario(str(s["name"]), dict(s["overrides"]), str(s["doc"])) for s in raw["scenarios"]],
        [str(n) for n in raw["notes"]],
        {str(k): str(v) for k, v in raw["givens_text"].items()},
        tuple(str(f) for f in raw["found"]),
    )


def _decode(payload: Any) -> tuple[list[tuple[str, str]], WorkbookPlan, list[Any]]:
    """(the files read, the plan, the tape's entries); raises on anything but what :func:`remember` writes."""
    deps = deps_of(payload)
    tape = payload["tape"]
    if not isinstance(tape, list):
        raise TypeError("not a tape")
    return deps, _plan(payload["plan"]), tape
