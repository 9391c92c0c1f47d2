"""Which files a pack may pull in, and loading each once (where packs and catalogs live is
:mod:`concur.lang.places`, whose names this module re-exports).

Shipped packs are the data package ``concur.formulas`` inside an installed wheel, or the
``formulas/`` folder of a source checkout (editable install).

Which files may be read (pack files are untrusted: ``concur check`` runs on pull requests):

* a pack named on the command line or in the API is the user's choice: a shipped pack's
  name, a name found in a ``--pack-path`` folder, or any path to a ``.yaml`` file;
* a pack's ``uses:`` entry resolves relative to *that pack's folder*, never the working
  directory: a name is a shipped pack, else ``NAME.yaml`` beside the pack, else in a
  ``--pack-path`` folder; a path must end in ``.yaml``/``.yml`` and, once symlinks are
  resolved, lie inside the pack's folder (or below) or inside a ``--pack-path`` folder.
  Absolute paths and ``..`` escapes are refused unless such a folder allows them;
* a catalog is named by an identifier and read from the shipped ``catalogs/`` folder and from
  the user's catalog folders (:func:`set_catalog_path`, or ``CONCUR_CATALOG_PATH``): there a
  file ``NAME.yaml`` adds entries to the shipped catalog of that name, and an entry whose id the
  shipped one also has replaces it (``concur calibrate --from ... --catalog DIR`` writes one).

Loading: every file is read once into bytes (regular files only, size-limited:
:func:`concur.lang.yamlsafe.read_source`); the parsed pack is cached in this process and on
disk (JSON, :mod:`concur.lang.serial`) under the sha256 of those bytes, of the label its
messages use, and of the parser's own source, so an edit that keeps a file's size and mtime
is never answered from a stale cache and a warm run never imports the YAML parser.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..cache import cache_dir, digest, read_json, write_json
from ..compiled import table
from ..errors import ConcurError, Location, PackError, UnitError, UnknownNameError
from .expr import name_problem
from .pack import Catalog, Pack, load_catalog, load_pack
from .places import (
    CATALOG_PATH_ENV,
    SUFFIXES,
    by_name,
    catalog_names,
    catalog_path,
    find_pack,
    formulas_dir,
    inside,
    pack_path,
    pack_paths,
    set_catalog_path,
    set_pack_path,
)
from .serial import decode_catalog, decode_pack, encode
from .yamlsafe import read_source

__all__ = [
    "CATALOG_PATH_ENV",
    "catalog_names",
    "catalog_path",
    "find_pack",
    "find_used_pack",
    "formulas_dir",
    "get_catalog",
    "get_pack",
    "inside",
    "load_pack_file",
    "pack_path",
    "pack_paths",
    "recording",
    "set_catalog_path",
    "set_pack_path",
]


def find_used_pack(ref: str, folder: Path, where: Location | None = None, owner: str = "pack") -> Path:
    """Resolve the ``uses:`` entry ``ref`` of a pack that lives in ``folder`` (see the module doc).

    The one confinement rule for every pack file a file names: a pack's ``uses:``, a scenario's
    ``packs:`` and a workbook definition's ``packs:`` (``owner`` names which, in messages).

    Raises :class:`PackError` at ``where`` for a path outside the allowed folders, a file that
    is not ``.yaml``, or a name no allowed folder holds. Nothing outside is read to find out.
    """
    if name_problem(ref) is None:
        found = by_name(ref, (folder, *pack_path()))
        if found is None:
            raise PackError(
                f"uses unknown pack '{ref}'",
                where=where,
                hint=f"known packs: {', '.join(pack_paths())}, or {ref}.yaml beside this pack",
            )
        return found
    if Path(ref).suffix not in SUFFIXES:
        raise PackError(f"uses '{ref}', which is neither a pack name nor a .yaml file", where=where)
    target = folder / ref  # an absolute ref replaces folder
    allowed = (folder, *pack_path())
    if not any(inside(target, root) for root in allowed):
        raise PackError(
            f"uses '{ref}', which is outside the {owner}'s folder",
            where=where,
            hint=f"a {owner} may use shipped packs and files in its own folder; "
            "to allow another folder, pass --pack-path DIR",
        )
    if not target.is_file():
        raise PackError(f"uses '{ref}', which does not exist", where=where)
    return target


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


@lru_cache(maxsize=1)
def _parser_fingerprint() -> str:
    """Digest of the code and data that turn a file into a Pack: a change to any of them is a new key."""
    here = Path(__file__).resolve().parent
    files = sorted(here.glob("*.py")) + sorted((here / "data").glob("*"))
    return digest(*(f.read_bytes() for f in files if f.is_file()))


# Process tables (concur.compiled): "loaded" content key -> Pack/Catalog; "loaded files"
# (kind, path, stat) -> (Pack/Catalog, sha256 of its bytes).
_READS: list[set[tuple[str, str]]] = []  # open recordings: (absolute path, sha256 of the bytes read)


@contextmanager
def recording() -> Iterator[set[tuple[str, str]]]:
    """Every pack and catalog file loaded inside the ``with`` block, as ``(absolute path, sha256 of
    its bytes)`` -- also those this process had loaded already. What a result computed inside the
    block depends on, so a cache of that result (``concur check``'s) can tell when it went stale."""
    reads: set[tuple[str, str]] = set()
    _READS.append(reads)
    try:
        yield reads
    finally:
        _READS.remove(reads)


def _note(path: Path, sha: str) -> None:
    if _READS:
        entry = (os.path.abspath(path), sha)
        for reads in _READS:
            reads.add(entry)


def _cached(kind: str, path: Path, load: Callable[[str, bytes], Any], decode: Callable[[Any], Any]) -> Any:
    """Load ``path`` once per content: from this process, else the disk cache, else ``load(label, bytes)``.

    Within one process a file whose stat is unchanged is not read again (a plan reads the gpus
    catalog for every configuration); across processes the disk cache keys on the content only.
    """
    try:
        st = path.stat()
        seen_key: tuple[Any, ...] | None = (kind, str(path), st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    except OSError:
        seen_key = None
    files = table("loaded files")
    known = files.get(seen_key) if seen_key is not None else None
    if known is not None:
        seen, sha = known
        _note(path, sha)
        return seen
    label = _label(path)
    source = read_source(path, label=label)
    sha = hashlib.sha256(source).hexdigest()
    _note(path, sha)
    key = digest(kind, label, source, _parser_fingerprint())
    loaded = table("loaded")
    hit = loaded.get(key)
    if hit is not None:
        return hit
    file = cache_dir() / "parsed" / f"{key[:40]}.json"
    value = read_json(file, kind, decode)
    if value is None:
        value = load(label, source)
        write_json(file, kind, encode(value))
    loaded.put(key, value)
    if seen_key is not None:
        files.put(seen_key, (value, sha))
    return value


def load_pack_file(path: Path, *, problems: list[ConcurError] | None = None) -> Pack:
    """The pack in ``path`` (cached by content).

    With ``problems`` (``concur check``), a pack that does not load is loaded again collecting
    every independent problem into the list, and the partial pack is returned -- never cached.
    """
    try:
        pack: Pack = _cached(
            "pack", path, lambda label, source: load_pack(path, label=label, content=source), decode_pack
        )
    except (PackError, UnitError):
        if problems is None:
            raise
        pack = load_pack(path, label=_label(path), problems=problems)
    return pack


def get_pack(name_or_path: str) -> Pack:
    return load_pack_file(find_pack(name_or_path))


def load_catalog_file(path: Path) -> Catalog:
    """The catalog in ``path`` (cached by content)."""
    catalog: Catalog = _cached(
        "catalog", path, lambda label, source: load_catalog(path, label=label, content=source), decode_catalog
    )
    return catalog


def _merge(base: Catalog | None, user: Catalog) -> Catalog:
    """``user``'s entries over ``base``'s; a field both declare must have one unit."""

    if base is None:
        return user
    for fname, field in user.fields.items():
        known = base.fields.get(fname)
        if known is not None and known.unit.text != field.unit.text:
            raise PackError(
                f"catalog {user.path}: field '{fname}' is in {field.unit.text or 'no unit'} but the "
                f"shipped catalog '{base.name}' declares it in {known.unit.text or 'no unit'}",
                hint="use the shipped field's unit",
            )
    return Catalog(
        base.name, base.doc, base.path, {**user.fields, **base.fields}, {**base.entries, **user.entries}, base.pick
    )


def get_catalog(name: str) -> Catalog:
    """The catalog ``name`` (an identifier, never a path): the shipped one, with the entries of any
    ``NAME.yaml`` in the user catalog folders added (the first folder wins on an id both hold)."""
    path = formulas_dir() / "catalogs" / f"{name}.yaml"
    if name_problem(name) is not None:
        raise UnknownNameError(f"unknown catalog '{name}'", hint=f"known catalogs: {', '.join(catalog_names())}")
    user_files = [folder / f"{name}.yaml" for folder in catalog_path()]
    user_files = [f for f in user_files if f.is_file() and inside(f, f.parent)]
    if not path.is_file() and not user_files:
        raise UnknownNameError(f"unknown catalog '{name}'", hint=f"known catalogs: {', '.join(catalog_names())}")
    catalog = load_catalog_file(path) if path.is_file() else None
    for file in reversed(user_files):  # the first folder is merged last, so it wins
        catalog = _merge(catalog, load_catalog_file(file))
    assert catalog is not None
    return catalog
