"""Where packs and catalogs live, and loading them once per process.

Shipped packs are the data package ``concur.formulas`` inside an installed
wheel, or the ``formulas/`` folder of a source checkout (editable install).
Any path given on the command line is loaded as well; a name resolves to a
shipped pack.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..errors import UnknownNameError
from .pack import Catalog, Pack, load_catalog, load_pack

__all__ = ["formulas_dir", "pack_paths", "find_pack", "get_pack", "get_catalog", "catalog_names"]


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
    raise UnknownNameError("cannot find concur's shipped packs (formulas/)",
                           hint="reinstall concur: pip install .")


def pack_paths() -> dict[str, Path]:
    """Shipped pack name -> file."""
    return {p.stem: p for p in sorted(formulas_dir().glob("*.yaml"))}


def find_pack(name_or_path: str) -> Path:
    """Resolve a pack name (``llm_memory``) or a path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or "/" in name_or_path or path.exists():
        if not path.is_file():
            raise UnknownNameError(f"pack file '{name_or_path}' does not exist")
        return path
    shipped = pack_paths()
    if name_or_path not in shipped:
        raise UnknownNameError(f"unknown pack '{name_or_path}'",
                               hint=f"known packs: {', '.join(shipped)}; or give a path to a .yaml file")
    return shipped[name_or_path]


def _label(path: Path) -> str:
    """How messages name a pack file: relative to the shipped root (``formulas/x.yaml``), else to the
    working directory, else the path as given -- the same text whether concur is installed or editable."""
    resolved = path.resolve()
    for root in (formulas_dir().parent, Path.cwd()):
        try:
            return str(resolved.relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


_NOT_CACHED = object()


def _disk_cached(kind: str, path: Path, label: str, load: "Callable[[], Any]") -> Any:
    """Parsed packs and catalogs are pickled in the cache folder, keyed by path, size and mtime,
    so a warm run never imports the YAML parser. Any cache problem falls back to parsing."""
    import hashlib

    from ..cache import read_pickle, write_pickle
    from .units import cache_dir

    st = path.stat()
    key = hashlib.sha256(f"{kind}|{path.resolve()}|{label}|{st.st_size}|{st.st_mtime_ns}|4".encode()).hexdigest()[:24]
    file = cache_dir() / "parsed" / f"{key}.pkl"
    cached = read_pickle(file, default=_NOT_CACHED)
    if cached is not _NOT_CACHED:
        return cached
    value = load()
    write_pickle(file, value)
    return value


@lru_cache(maxsize=None)
def _load_pack_cached(path: str, mtime: float, size: int) -> Pack:
    label = _label(Path(path))
    return _disk_cached("pack", Path(path), label, lambda: load_pack(path, label=label))


def get_pack(name_or_path: str) -> Pack:
    path = find_pack(name_or_path)
    st = path.stat()
    return _load_pack_cached(str(path), st.st_mtime, st.st_size)


def catalog_names() -> list[str]:
    return [p.stem for p in sorted((formulas_dir() / "catalogs").glob("*.yaml"))]


@lru_cache(maxsize=None)
def get_catalog(name: str) -> Catalog:
    path = formulas_dir() / "catalogs" / f"{name}.yaml"
    if not path.is_file():
        raise UnknownNameError(f"unknown catalog '{name}'", hint=f"known catalogs: {', '.join(catalog_names())}")
    label = _label(path)
    return _disk_cached("catalog", path, label, lambda: load_catalog(path, label=label))
