"""A missing-input refusal that names only what would answer the question, and why it is missing.

The plan's refusal ("cannot determine X from the givens") lists every input nothing determines --
for a fleet question whose GPU has no list price that once read "give gpu_hour_price,
subscribers, step_time_per_seq", two of which have nothing to do with the question. This module
narrows it, structure only (no values are solved):

* **only inputs that determine the targets**: each listed input, and each input a given preset
  left unset, is tried alone, added to the givens; those that make every target determined are
  kept (never a target itself). When none does alone (two are needed), the list is left as it
  was -- a longer list is better than a wrong one;
* **why it is missing**: an input a given preset would have filled from a further catalog of its
  chain that has no entry for the id (``gpu=mi300x`` has no ``prices`` entry) is said to be so:
  "gpu 'mi300x' has no entry in the prices catalog (no gpu_hour_price): give gpu_hour_price".

The result is a new :class:`UnderdeterminedError` with the same message and a narrowed ``missing``
and hint; any other error is left to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConcurError, UnderdeterminedError
from ..lang.library import get_catalog
from ..lang.model import Model
from .givens import catalog_id, resolve_givens
from .plan import describe_var
from .problem import Problem

__all__ = ["narrow_missing", "unset_by_presets"]


def unset_by_presets(model: Model, given: Mapping[str, Any]) -> dict[str, str]:
    """Variable -> why a given preset left it unset: a further catalog of the preset's chain has
    no entry for the id given (the first catalog's missing id is refused earlier)."""
    out: dict[str, str] = {}
    for key, raw in given.items():
        chain = model.presets.get(key, ())
        if len(chain) < 2:
            continue
        ident = catalog_id(get_catalog(chain[0].catalog).entries, str(raw))
        for preset in chain[1:]:
            catalog = get_catalog(preset.catalog)
            if ident in catalog.entries:
                continue
            mapping = preset.fields or {f: f for f in catalog.fields}
            for field, name in mapping.items():
                if name in model.variables and name not in given:
                    what = catalog.fields[field].doc if field in catalog.fields else field
                    out.setdefault(name, f"{key} '{ident}' has no entry in the {catalog.name} catalog ({what})")
    return out


def _determined_with(model: Model, known: dict[str, float], find: tuple[str, ...], extra: str) -> bool:
    problem = Problem(model, {**known, extra: 1.0}, find)
    return all(t in problem.known or t in problem.matching.determined for t in find)


def narrow_missing(
    exc: UnderdeterminedError, model: Model, find: tuple[str, ...], given: Mapping[str, Any]
) -> UnderdeterminedError:
    """``exc`` with ``missing`` narrowed to the inputs that alone determine ``find`` and the hint
    saying why a preset left one unset (see the module essay); ``exc`` itself when nothing narrows."""
    try:
        resolved = resolve_givens(model, dict(given))
    except ConcurError:
        return exc
    # why each input is unset: a further catalog of a preset's chain without the id, or a picked
    # column the entry lacks (no list price at the provider); a reason the refusal already gives is not repeated
    unset = {**unset_by_presets(model, given), **resolved.unlisted}
    unset = {n: why for n, why in unset.items() if why not in exc.message}
    candidates = [n for n in dict.fromkeys([*unset, *exc.missing]) if n not in find and n not in given]
    try:
        values = resolved.values
        known = {k: v for k, v in values.items() if k not in find}
        enough = [n for n in candidates if n not in known and _determined_with(model, known, find, n)]
    except ConcurError:
        return exc
    need = enough or [n for n in exc.missing if n not in find]
    if not need:
        return exc
    if need == list(exc.missing) and not any(n in unset for n in need):
        return exc
    why = [f"{unset[n]}: give {n}" for n in need if n in unset]
    rest = [n for n in need if n not in unset]
    parts = why + ([f"give {', '.join(describe_var(model, n) for n in rest[:8])}"] if rest else [])
    if model.presets and rest:
        parts[-1] += f" (presets: {', '.join(sorted(model.presets))} set many at once)"
    if enough and rest:  # each one alone answers: alternatives
        parts = why + [f"give {describe_var(model, n)}" for n in rest[:8]]
        if model.presets:
            parts[-1] += f" (presets: {', '.join(sorted(model.presets))} set many at once)"
    return UnderdeterminedError(
        exc.message,
        missing=tuple(need),
        hint=("; or " if enough else "; ").join(parts),
        where=exc.where,
        variable=exc.variable,
    )
