"""``concur solve``'s answers, remembered: the same question, with nothing it read changed, is printed
again without solving (or importing the solver).

A solve prints a function of its question and of the files it reads. The question is the packs
named, ``--find``, ``--set``, ``--scenario``, ``--json`` and ``--explain``, the ``--pack-path`` and
catalog folders in their order, and the working folder relative paths start from; the files are
every pack and catalog the solve loaded. An entry follows :mod:`concur.lang.remembered`: its name
digests the question, concur's own code, the settings and folder listings that decide what a name
resolves to and the bytes of the files named (a pack given as a path, a scenario file); its
dependencies are the files the solve read, each with the sha256 of its bytes.

Invariants:

* What is printed from an entry is the text the solve printed, through the same printer, so a
  remembered answer is byte for byte the computed one (``tests/cli/test_remembered_answers.py``).
* Only answers are remembered. A refusal, an impossible scenario or a budget that ran out is
  computed again every time and reported in full; so is anything asked with a scenario read from
  stdin (it cannot be read twice).
* A missing, stale, unreadable or forged entry costs the solve, never a different answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cache import cache_dir, read_json, write_json
from ..errors import ConcurError
from ..lang.places import catalog_path, find_pack, pack_path
from ..lang.remembered import deps_of, inputs_key, unchanged

__all__ = ["KIND", "answered", "question_key"]

KIND = "solve-answer"


def question_key(
    packs: tuple[str, ...],
    find: tuple[str, ...],
    sets: tuple[str, ...],
    scenario: str | None,
    as_json: bool,
    explain: bool,
) -> str | None:
    """The entry name of this question (see the module essay); None when it is not remembered (a
    scenario from stdin) or a file it names cannot be read (the solve reports that)."""
    if scenario == "-":
        return None
    try:
        files = [find_pack(p) for p in packs]
    except ConcurError:
        return None
    if scenario and scenario != "default":
        files.append(Path(scenario))
    asked = {
        "packs": list(packs),
        "find": list(find),
        "set": list(sets),
        "scenario": scenario,
        "json": as_json,
        "explain": explain,
        "cwd": os.getcwd(),
        "pack_path": [str(p) for p in pack_path()],
        "catalog_path": [str(p) for p in catalog_path()],
    }
    return inputs_key(KIND, json.dumps(asked, sort_keys=True), files=files)


def _path(key: str) -> Path:
    return cache_dir() / "answers" / f"{key[:40]}.json"


def _decode(payload: Any) -> tuple[list[tuple[str, str]], str]:
    text = payload["text"]
    if not isinstance(text, str):
        raise TypeError("the answer is not text")
    return deps_of(payload), text


def answered(key: str | None, compute: Callable[[], str]) -> str:
    """The text printed for the question ``key``: remembered, when every file it read is unchanged;
    else ``compute()``, kept with the pack and catalog files it read (an error it raises is not)."""
    if key is not None:
        hit = read_json(_path(key), KIND, _decode)
        if hit is not None and unchanged(hit[0]):
            return hit[1]
    from ..lang.library import recording  # only on a miss: a remembered answer parses nothing

    with recording() as reads:
        text = compute()
    if key is not None:
        write_json(_path(key), KIND, {"deps": sorted(reads), "text": text})
    return text
