"""Results remembered by their inputs: the one rule every result kept in the cache folder follows.

``concur check``'s passes (:mod:`concur.lang.checked`), the fleet plan of a workbook
(:mod:`concur.analysis.fleet_memo`), a workbook's plan and formulas (:mod:`concur.excel.memo`) and
``concur solve``'s answers (:mod:`concur.cli.answers`) are each recomputed only when something they
depend on changed. What they depend on is said in two parts:

* the entry's **name**, :func:`inputs_key`: a :func:`~concur.cache.digest` of what was asked, of
  concur's own code (:func:`~concur.cache.source_digest`: an edited concur recomputes), of the
  settings in the environment that change a result (:data:`SETTINGS`), of what decides which file
  a pack or catalog *name* resolves to (the ``*.yaml`` names in the shipped folders, the
  ``--pack-path`` and catalog folders, and the folders of the files named), and of the bytes of
  the files named (a pack given as a path, a scenario file);
* the entry's **dependencies**, ``deps``: every pack and catalog file the computation read
  (:func:`concur.lang.library.recording`), each with the sha256 of its bytes. An entry is used
  only while :func:`unchanged` holds for them: an edited price, a used pack or a catalog is a miss.

A missing, stale, unreadable or forged entry (:func:`concur.cache.read_json` checks its MAC)
costs the computation, never a different result.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..cache import digest, source_digest
from ..readfile import FileRefused, read_regular
from .places import catalog_path, formulas_dir, pack_path
from .yamlsafe import MAX_BYTES

__all__ = ["SETTINGS", "deps_of", "folder_names", "inputs_key", "unchanged"]

SETTINGS = ("CONCUR_SOLVE_BUDGET", "CONCUR_SOLVE_SECONDS", "CONCUR_CATALOG_PATH")
"""Environment variables that change what a computation gives (its budget, the user catalogs)."""


def folder_names(folder: Path | str) -> str:
    """The ``*.yaml``/``*.yml`` names in ``folder``, sorted (empty when it cannot be listed)."""
    try:
        return "\0".join(sorted(n for n in os.listdir(folder) if n.endswith((".yaml", ".yml"))))
    except OSError:
        return ""


def _bytes(path: Path | str) -> bytes | None:
    try:
        return read_regular(path, MAX_BYTES)
    except FileRefused:
        return None


def inputs_key(kind: str, *asked: str, files: Iterable[Path] = ()) -> str | None:
    """The name of the entry of ``kind`` for the question ``asked`` over the files ``files`` (see the
    module essay); None when one of ``files`` cannot be read (the computation reports that)."""
    files = list(files)
    shipped = formulas_dir()
    folders = {shipped, shipped / "catalogs", *pack_path(), *catalog_path(), *(f.parent for f in files)}
    parts: list[bytes | str] = [kind, *asked, source_digest()]
    parts += [f"{name}={os.environ.get(name, '')}" for name in SETTINGS]
    for folder in sorted(str(os.path.abspath(f)) for f in folders):
        parts += [folder, folder_names(folder)]
    for f in files:
        data = _bytes(f)
        if data is None:
            return None
        parts += [os.path.abspath(f), data]
    return digest(*parts)


def unchanged(deps: Iterable[tuple[str, str]]) -> bool:
    """Every file in ``deps`` (``(path, sha256)`` pairs) still has the bytes it had."""
    for path, sha in deps:
        data = _bytes(path)
        if data is None or hashlib.sha256(data).hexdigest() != sha:
            return False
    return True


def deps_of(payload: Any) -> list[tuple[str, str]]:
    """The ``deps`` of an entry's payload as ``(path, sha256)`` pairs; raises ``TypeError``/
    ``KeyError``/``ValueError`` on anything else (:func:`concur.cache.read_json` then misses)."""
    deps = payload["deps"]
    if not isinstance(deps, list):
        raise TypeError("deps is not a list")
    out = []
    for path, sha in deps:
        if not (isinstance(path, str) and isinstance(sha, str)):
            raise TypeError("a dependency is not (path, sha256)")
        out.append((path, sha))
    return out
