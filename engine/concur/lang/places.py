"""Where packs and catalogs live: the shipped folder, the ``--pack-path`` and catalog folders, and
which file a pack's name on the command line stands for.

Kept apart from loading (:mod:`concur.lang.library`, which re-exports every name here) so that
what only needs a pack's *place* -- the ``--pack-path`` option, the name of a remembered answer
(:mod:`concur.cli.answers`) -- imports neither the expression language nor the pack parser.
The folders set here are process state: :func:`set_pack_path` and :func:`set_catalog_path`
replace the previous setting.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from ..errors import UnknownNameError, UsageError

__all__ = [
    "CATALOG_PATH_ENV",
    "SUFFIXES",
    "by_name",
    "catalog_names",
    "catalog_path",
    "find_pack",
    "formulas_dir",
    "inside",
    "pack_path",
    "pack_paths",
    "set_catalog_path",
    "set_pack_path",
]

SUFFIXES = (".yaml", ".yml")
_PACK_PATH: tuple[Path, ...] = ()
_CATALOG_PATH: tuple[Path, ...] = ()
CATALOG_PATH_ENV = "CONCUR_CATALOG_PATH"
"""Environment variable: user catalog folders (``os.pathsep``-separated), searched after :func:`set_catalog_path`."""


@lru_cache(maxsize=1)
def formulas_dir() -> Path:
    """The folder holding the shipped ``*.yaml`` packs and ``catalogs/``."""
    package = Path(__file__).resolve().parent.parent  # concur/
    for candidate in (package / "formulas", package.parent.parent / "formulas"):
        if (candidate / "catalogs").is_dir():
            return candidate
    try:
        import importlib.resources as resources

        path = Path(str(resources.files("concur.formulas")))
        if path.is_dir():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    raise UnknownNameError("cannot find concur's shipped packs (formulas/)", hint="reinstall concur: pip install .")


def _folders(folders: Iterable[str | Path], what: str) -> tuple[Path, ...]:
    """``folders`` resolved; :class:`UsageError` naming ``what`` for one that is not a folder."""
    resolved = []
    for folder in folders:
        path = Path(folder)
        if not path.is_dir():
            raise UsageError(f"{what} '{folder}' is not a folder")
        resolved.append(path.resolve())
    return tuple(resolved)


def set_pack_path(folders: Iterable[str | Path]) -> None:
    """Trust ``folders`` (``--pack-path``) as places packs may be found and ``uses:`` may reach.

    Replaces the previous setting; raises :class:`UsageError` for a folder that does not exist.
    """
    global _PACK_PATH
    _PACK_PATH = _folders(folders, "--pack-path")


def pack_path() -> tuple[Path, ...]:
    """The folders added with :func:`set_pack_path` (resolved)."""
    return _PACK_PATH


def pack_paths() -> dict[str, Path]:
    """Shipped pack name -> file."""
    return {p.stem: p for p in sorted(formulas_dir().glob("*.yaml"))}


def inside(path: Path, folder: Path) -> bool:
    """True when ``path``, symlinks resolved, is ``folder`` or lies below it."""
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError, RuntimeError):
        return False


def by_name(name: str, folders: Iterable[Path]) -> Path | None:
    """A shipped pack called ``name``, else ``NAME.yaml`` in the first of ``folders`` holding it."""
    shipped = pack_paths().get(name)
    if shipped is not None:
        return shipped
    for folder in folders:
        for suffix in SUFFIXES:
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file() and inside(candidate, folder):
                return candidate
    return None


def find_pack(name_or_path: str) -> Path:
    """Resolve a pack the user named: a shipped pack, a pack in a ``--pack-path`` folder, or a path."""
    path = Path(name_or_path)
    if path.suffix in SUFFIXES or "/" in name_or_path or path.exists():
        if not path.exists():
            raise UnknownNameError(f"pack file '{name_or_path}' does not exist")
        return path  # reading it refuses anything but a regular file (a FIFO, a device, a folder)
    found = by_name(name_or_path, _PACK_PATH)
    if found is None:
        raise UnknownNameError(
            f"unknown pack '{name_or_path}'",
            hint=f"known packs: {', '.join(pack_paths())}; or give a path to a .yaml file",
        )
    return found


def catalog_names() -> list[str]:
    return [p.stem for p in sorted((formulas_dir() / "catalogs").glob("*.yaml"))]


def set_catalog_path(folders: Iterable[str | Path]) -> None:
    """User catalog folders, searched before ``CONCUR_CATALOG_PATH``; replaces the previous setting.

    Raises :class:`UsageError` for a folder that does not exist.
    """
    global _CATALOG_PATH
    _CATALOG_PATH = _folders(folders, "catalog folder")


def catalog_path() -> tuple[Path, ...]:
    """The user catalog folders in search order: :func:`set_catalog_path`, then ``CONCUR_CATALOG_PATH``.

    A folder named in the environment that does not exist is skipped (the variable may be set
    for a whole team); one given to :func:`set_catalog_path` is checked there.
    """
    env = [Path(p) for p in os.environ.get(CATALOG_PATH_ENV, "").split(os.pathsep) if p.strip()]
    return _CATALOG_PATH + tuple(p.resolve() for p in env if p.is_dir())
