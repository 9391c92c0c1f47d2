"""Versioned preset ids: ``NAME@VERSION`` is catalog entry NAME, read for one engine release.

A catalog entry may declare two text fields: ``version``, the release ``NAME`` alone stands for
(the catalog states it: the newest release among the measurements the entry was fitted on), and
``versions``, every release (``major.minor``, comma-separated) whose measurements are in the fit.
``engine=vllm`` is then ``vllm@<version>``; ``engine=vllm@0.10`` is the same entry when 0.10 is
one of its ``versions`` (``v0.10.2`` and ``0.10`` are both release 0.10).

A version without measurements of its own is refused -- one line listing the known versions --,
never mapped to the nearest fitted one: engines change their scheduler and kernels between
releases (vLLM's V1 engine from 0.8), so constants fitted on one release say nothing measured
about another, and a user naming a release wants that release or to be told it is not there.

Invariants: the id an answer uses is always an entry id of the catalog (the version is carried
beside it, never part of the lookup); a catalog whose entries declare no ``version`` accepts no
``@`` ids.

    >>> release("vLLM v0.10.2"), release("lmsysorg/sglang:v0.5.9-cu130"), release("NIM 1.8.0")
    ('0.10', '0.5', None)
    >>> split_id("vllm@0.10"), split_id("vllm")
    (('vllm', '0.10'), ('vllm', None))
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import UnknownNameError
from .pack import Catalog

__all__ = ["current_version", "fitted_versions", "release", "resolve_version", "split_id"]


def release(text: str) -> str | None:
    """The ``major.minor`` release an engine_version text names, or None when it names none of the
    engine's own (``NIM 1.8.0`` is NIM's version, ``vLLM-based`` names no release)."""
    text = text.strip()
    m = re.match(r"^(?:vLLM |SGLang |TensorRT-LLM )?v?(\d+)\.(\d+)", text) or re.match(
        r"^[\w./-]+:v?(\d+)\.(\d+)", text
    )
    if m is None:
        return None
    return f"{int(m.group(1))}.{int(m.group(2))}"


def release_key(version: str) -> tuple[int, ...]:
    """``0.10`` after ``0.9``: releases order by their numbers, not their text."""
    return tuple(int(x) for x in version.split("."))


def split_id(raw: str) -> tuple[str, str | None]:
    """(entry id, version typed after ``@`` or None)."""
    name, sep, version = raw.partition("@")
    return (name.strip(), version.strip() or None) if sep else (raw, None)


def current_version(catalogs: Sequence[Catalog], ident: str) -> str | None:
    """The release ``ident`` alone stands for: the first catalog whose entry states a ``version``."""
    for catalog in catalogs:
        entry = catalog.entries.get(ident)
        if entry is not None and "version" in entry.values:
            return str(entry.values["version"][0])
    return None


def fitted_versions(catalogs: Sequence[Catalog], ident: str) -> list[str]:
    """The releases ``ident``'s values were fitted on (its ``versions`` field), oldest first."""
    for catalog in catalogs:
        entry = catalog.entries.get(ident)
        if entry is not None and "versions" in entry.values:
            listed = [v.strip() for v in str(entry.values["versions"][0]).split(",") if v.strip()]
            return sorted(listed, key=release_key)
    return []


def resolve_version(catalogs: Sequence[Catalog], key: str, ident: str, version: str | None) -> str | None:
    """The release an answer with ``key=ident[@version]`` uses: ``version`` when the entry was fitted
    on it, the entry's current one when none is typed, None when the entry states no version.

    Raises UnknownNameError (one line, the known versions) for a release without measurements."""
    current = current_version(catalogs, ident)
    if version is None:
        return current
    known = fitted_versions(catalogs, ident)
    typed = release(version) or version
    if typed in known:
        return typed
    listing = ", ".join(f"{ident}@{v}" for v in known)
    raise UnknownNameError(
        f"unknown {key} version '{ident}@{version}'",
        hint=(
            f"fitted versions: {listing} ({key}={ident} is {ident}@{current}); no constants are fitted on other releases"
            if known
            else f"{key} {ident} states no versions; give {key}={ident}"
        ),
    )
