"""``concur check``'s memory: which packs passed, so a warm check neither re-solves nor re-checks them.

Two kinds of entry, both in the cache folder (:mod:`concur.cache`: JSON, HMAC-authenticated with
the user's key kept outside the folder), both meaning only "this passed":

* ``check-examples``, one per pack file: every ``examples:`` entry of the pack answered what it
  expects. ``concur check`` skips solving the examples of a pack with a fresh entry.
* ``check-run``, one per set of files checked: the whole check (unit check, catalogs and, when
  asked, examples) was clean. ``concur check`` then prints its ``ok`` line without importing
  the unit tables or the solver.

Invariants:

* An entry's name and dependencies follow :mod:`concur.lang.remembered`: the checked files'
  paths and bytes, concur's own code, the settings and folder listings that decide what a name
  resolves to; its payload lists every pack and catalog file the check read (a used pack, a
  catalog) with the sha256 of its bytes, and an entry is *fresh* only while each still has them.
* Only passes are remembered. A failure is never cached, so a failure is always reported in
  full; a missing, stale, unreadable, forged or moved entry costs a recomputation, never a
  hidden failure (a forged "passed" fails its MAC).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..cache import cache_dir, read_json, write_json
from .library import inside
from .remembered import deps_of, inputs_key, unchanged

__all__ = ["examples_passed", "remember_examples", "remember_run", "run_passed", "targets_files"]

Deps = Iterable[tuple[str, str]]


def targets_files(targets: list[str]) -> tuple[list[Path], list[Path]] | None:
    """The pack files and catalog files ``concur check targets`` reads, in its order; None when a
    folder holds a link leading out (the full check reports that, so it is never remembered)."""
    packs: list[Path] = []
    catalogs: list[Path] = []
    for target in targets:
        path = Path(target)
        if not path.is_dir():
            packs.append(path)
            continue
        for folder, out in ((path, packs), (path / "catalogs", catalogs)):
            if folder is not path and (not folder.is_dir() or not inside(folder, path)):
                continue
            files = sorted(folder.glob("*.yaml"))
            if not all(inside(f, folder) for f in files):
                return None
            out.extend(files)
    return packs, catalogs


def _key(kind: str, files: list[Path], extra: str = "") -> str | None:
    """The entry's name for ``files`` (None when one cannot be read: the check reports it)."""
    return inputs_key(kind, extra, files=files)


def _fresh(kind: str, key: str | None) -> bool:
    """True when the entry ``key`` exists, is genuine, and every file it lists still has its bytes."""
    if key is None:
        return False
    deps = read_json(cache_dir() / "checked" / f"{key[:40]}.json", kind, deps_of)
    return deps is not None and unchanged(deps)


def _remember(kind: str, key: str | None, deps: Deps) -> None:
    if key is not None:
        write_json(cache_dir() / "checked" / f"{key[:40]}.json", kind, {"deps": sorted(deps)})


def examples_passed(pack: Path) -> bool:
    """Whether every example of the pack in ``pack`` is remembered as passing, with the same inputs."""
    return _fresh("check-examples", _key("check-examples", [pack]))


def remember_examples(pack: Path, deps: Deps) -> None:
    """Remember that the examples of ``pack`` passed, reading the files ``deps``."""
    _remember("check-examples", _key("check-examples", [pack]), deps)


def run_passed(packs: list[Path], catalogs: list[Path], examples: bool) -> bool:
    """Whether ``concur check`` of exactly these files (examples solved or not) is remembered as clean."""
    return _fresh("check-run", _key("check-run", packs + catalogs, f"{len(packs)} examples={examples}"))


def remember_run(packs: list[Path], catalogs: list[Path], examples: bool, deps: Deps) -> None:
    """Remember that ``concur check`` of these files was clean, reading the files ``deps``."""
    _remember("check-run", _key("check-run", packs + catalogs, f"{len(packs)} examples={examples}"), deps)
