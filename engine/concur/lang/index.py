"""The shipped pack index: what every shipped pack declares, without parsing the packs.

A question that names no pack (``concur solve --find users``) must find the pack that answers it.
Building every shipped pack's model to learn the names each declares parses eleven YAML files
and cost a cold start ~0.8 s; this index answers the same question from one small JSON file,
``formulas/index.json``, and only the packs and catalogs in play are then parsed.

The file holds, per shipped pack: the variables its model declares (its own and those of the
packs it uses), its preset keys, its ``answers:`` list and the sha256 of its file; and one digest
of every shipped pack file. It is used only while that digest matches the files on disk: an
edited, added or removed pack makes it stale, and then :func:`shipped_index` builds the models
as before (:func:`concur.lang.model.pack_index`), which is always right and only slower.

Regenerate it after editing a shipped pack::

    python -m concur.lang.index

(``tests/lang/test_pack_index.py`` fails while it is stale, like the shipped unit table and
closed forms.)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..cache import digest
from ..errors import ConcurError
from .library import formulas_dir, get_pack, pack_paths
from .model import build_model, pack_index
from .yamlsafe import read_source

__all__ = ["INDEX_NAME", "build_index", "index_path", "packs_digest", "shipped_index", "write_index"]

INDEX_NAME = "index.json"
_FORMAT = 1

Index = dict[str, tuple[frozenset[str], frozenset[str]]]


def index_path() -> Path:
    return formulas_dir() / INDEX_NAME


def _file_digests() -> dict[str, str]:
    """Shipped pack name -> sha256 of its file's bytes (what :attr:`concur.lang.pack.Pack.digest` holds)."""
    return {name: hashlib.sha256(read_source(path)).hexdigest() for name, path in pack_paths().items()}


def packs_digest(files: dict[str, str]) -> str:
    """One digest of every shipped pack file (names and contents)."""
    return digest(str(_FORMAT), *(f"{name}\0{sha}" for name, sha in sorted(files.items())))


def build_index() -> dict[str, Any]:
    """The index of the shipped packs as they are on disk (builds every shipped model)."""
    files = _file_digests()
    packs = {}
    for name in pack_paths():
        model = build_model([name])
        packs[name] = {
            "variables": sorted(model.variables),
            "presets": sorted(model.presets),
            "answers": sorted(get_pack(name).answers),
            "digest": files[name],
        }
    return {"format": _FORMAT, "digest": packs_digest(files), "packs": packs}


def write_index() -> Path:
    """Regenerate ``formulas/index.json`` (``python -m concur.lang.index``)."""
    path = index_path()
    path.write_text(json.dumps(build_index(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _read() -> Index | None:
    """The shipped index when it is well-formed and current, else None."""
    try:
        data = json.loads(index_path().read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return None
        files = _file_digests()
        if data.get("digest") != packs_digest(files) or set(data["packs"]) != set(files):
            return None
        out: Index = {}
        for name, entry in data["packs"].items():
            names, answers = [*entry["variables"], *entry["presets"]], entry["answers"]
            if not all(isinstance(n, str) for n in [*names, *answers]):
                return None
            out[name] = (frozenset(names), frozenset(answers))
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ConcurError):
        return None  # unreadable or malformed: build the models (which say what is wrong, if anything)


def shipped_index() -> Index:
    """Shipped pack name -> (the names its model declares, the questions it answers by default):
    from ``formulas/index.json`` while it is current, else by building every shipped model."""
    found = _read()
    if found is not None:
        return found
    return pack_index()


if __name__ == "__main__":
    import concur.lang.index  # the module the library uses (this file runs as __main__, a second copy)

    print(f"wrote {concur.lang.index.write_index()}")
