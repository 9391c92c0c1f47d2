"""Givens: user values and presets resolved to base-unit floats (explicit values win over presets).

Every given is converted with its variable's unit, checked against the variable's bounds and
integrality, and remembered with where it came from (``given`` or ``preset gpu=...``). A given
whose variable declares ``limit:`` is a target to meet, not an equality. A catalog with a
``pick`` (the price list) fills one variable from the column a given chooses (``provider``) or
its default, and records what the answer must say: the price it assumed, or that the entry has
no value in that column (:mod:`concur.lang.pick`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConcurError, UnknownNameError, UsageError
from ..lang.fallback import LENT, fallback_of, fallback_pairs, fallback_values
from ..lang.library import get_catalog
from ..lang.model import Model
from ..lang.pack import Catalog, CatalogEntry, Preset, Variable
from ..lang.pick import listed_by, picked_field
from ..lang.values import convert_value, count_factor, prefix_note
from ..lang.versions import resolve_version, split_id
from .problem import in_bounds
from .roots import is_whole

__all__ = ["resolve_givens"]


@dataclass
class Givens:
    """Resolved givens: base-unit values, where each came from, the targets to meet, the texts typed."""

    values: dict[str, float]
    sources: dict[str, str]  # name -> "given" | "preset gpu=h100-sxm-80gb"
    limits: dict[str, str]  # given names that are targets to meet -> at_least/at_most
    texts: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how a given was read ("8k" = 8,000, not 8,192)
    presets: dict[str, str] = field(default_factory=dict)  # preset key -> catalog id chosen (model, gpu)
    citations: dict[str, str] = field(default_factory=dict)  # name -> the catalog source of a preset value
    picks: dict[str, str] = field(default_factory=dict)  # pick catalog -> the column chosen (prices -> aws)
    unlisted: dict[str, str] = field(default_factory=dict)  # name -> why its preset left it unset (no price)
    assumed: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # name -> (note an answer using it prints, source)
    versions: dict[str, tuple[str, bool]] = field(default_factory=dict)  # key -> (release used, typed)


def catalog_id(entries: Any, raw: str) -> str:
    """``raw`` as a catalog id: itself when the catalog has it, else the one id equal to it ignoring
    case (``H100-SXM-80GB`` is ``h100-sxm-80gb``), else ``raw`` unchanged (refused by the caller)."""
    if raw in entries:
        return raw
    same = [ident for ident in entries if ident.lower() == raw.strip().lower()]
    return same[0] if len(same) == 1 else raw


def resolve_givens(model: Model, given: dict[str, Any], unknown: Collection[str] = ()) -> Givens:
    """Expand presets and convert every given to base units (explicit values win over presets); a
    fallback preset not given lends its fallback's values (:mod:`concur.lang.fallback`), except from
    a variable in ``unknown`` (a question's targets: what is solved for has no value to lend)."""
    out = Givens({}, {}, {})
    for key, raw in given.items():
        if key in model.presets:
            _expand_preset(model, given, key, str(raw), out)
    values, sources = out.values, out.sources
    for key, raw in given.items():
        if key in model.presets:
            continue
        var = model.variable(key)
        values[key] = _given_value(key, raw, var)
        sources[key] = "given"
        out.texts[key] = str(raw)
        note = prefix_note(raw, var, values[key])
        if note:
            out.notes.append(note)
    _lend_fallbacks(model, given, out, unknown)
    limits = {k: model.variables[k].limit for k in values if sources.get(k) == "given" and model.variables[k].limit}
    out.limits = {k: v for k, v in limits.items() if v}
    for name in list(out.unlisted):
        if name in values:
            del out.unlisted[name]
    for name in list(out.assumed):
        if sources.get(name) == "given":
            del out.assumed[name]
    return out


def _lend_fallbacks(model: Model, given: dict[str, Any], out: Givens, unknown: Collection[str]) -> None:
    """What fallback presets not given lend (:mod:`concur.lang.fallback`): a value the fallback's
    preset filled reads as this preset's (``preset prefill_gpu=h100-sxm-80gb``), one typed for the
    fallback's variable as :data:`~concur.lang.fallback.LENT` it; why the fallback's price stayed
    unset is why ours did."""
    values, sources = out.values, out.sources
    lendable = {k: v for k, v in values.items() if k not in unknown}
    for ours, (value, theirs, key) in fallback_values(model, given, lendable).items():
        values[ours] = value
        lent = f"preset {fallback_of(model, key)}="
        src = sources[theirs]
        sources[ours] = f"preset {key}={src[len(lent) :]}" if src.startswith(lent) else f"{LENT}{theirs}"
        if theirs in out.citations:
            out.citations[ours] = out.citations[theirs]
    for key in model.presets:
        if key not in given:
            for ours, theirs in fallback_pairs(model, key):
                if ours not in values and ours not in given and theirs in out.unlisted:
                    out.unlisted[ours] = out.unlisted[theirs]


def _expand_preset(model: Model, given: dict[str, Any], key: str, raw: str, out: Givens) -> None:
    """Fill ``out`` with what ``key=raw`` sets in each catalog of its chain (never a name given)."""
    chain = [get_catalog(p.catalog) for p in model.presets[key]]
    raw, typed = split_id(raw)
    raw = catalog_id(chain[0].entries, raw)
    version = resolve_version(chain, key, raw, typed) if any(raw in c.entries for c in chain) else None
    if version is not None:
        out.versions[key] = (version, typed is not None)
    out.presets[key] = raw
    for n, (preset, catalog) in enumerate(zip(model.presets[key], chain)):  # the catalogs read above, not again
        entry = catalog.entries.get(raw)
        if entry is None and n == 0:
            import difflib

            lower = {ident.lower(): ident for ident in catalog.entries}
            close = [lower[c] for c in difflib.get_close_matches(raw.lower(), list(lower), n=3)]
            raise UnknownNameError(
                f"unknown {key} '{raw}'",
                hint=(f"did you mean {', '.join(close)}? " if close else "") + f"known: {', '.join(catalog.entries)}",
            )
        column = None
        if catalog.pick is not None:  # one column of the entry, chosen by a given (provider)
            column = picked_field(catalog, given)
            out.picks[catalog.name] = column
            sets = preset.fields.get(catalog.pick.sets, catalog.pick.sets)
            _note_pick(catalog, key, raw, column, given, model, sets, out)
        if entry is None:
            continue  # a further catalog (prices) may lack the entry: its fields stay unset
        _fill_entry(model, given, key, raw, preset, catalog, entry, column, out)


def _fill_entry(
    model: Model,
    given: dict[str, Any],
    key: str,
    raw: str,
    preset: Preset,
    catalog: Catalog,
    entry: CatalogEntry,
    column: str | None,
    out: Givens,
) -> None:
    """The variables entry ``raw`` of ``catalog`` fills for preset ``key`` (a picked catalog: its
    column only), in base units, each with its source and citation; never a name given or filled."""
    for fname, (fval, cite, floc) in entry.values.items():
        if catalog.pick is not None and column is not None:
            if fname != column:
                continue
            target = preset.fields.get(catalog.pick.sets, catalog.pick.sets)
        elif preset.fields:
            if fname not in preset.fields:
                continue
            target = preset.fields[fname]
        else:
            target = fname
        var = model.variables.get(target)
        if var is None or target in given or target in out.values:
            continue
        cf = catalog.fields[fname]
        if var.choices:
            out.values[target] = convert_value(fval, var, floc)
        else:
            if isinstance(fval, bool) or not isinstance(fval, (int, float)):
                raise UsageError(f"catalog value {catalog.name}.{entry.id}.{fname} is not a number", where=floc)
            out.values[target] = float(fval) * cf.unit.factor * count_factor(cf.unit, var, floc)
        out.sources[target] = f"preset {key}={raw}"
        if isinstance(cite, str) and cite:
            out.citations[target] = cite


def _given_value(key: str, raw: Any, var: Variable) -> float:
    """``raw`` given for ``var`` in base units, refused (:class:`UsageError`) when it does not convert,
    lies outside the variable's bounds (no slack: the user typed it) or is not whole for a count
    (by the numeric policy's :func:`~concur.solver.roots.is_whole`)."""
    try:
        value = convert_value(raw, var)
    except UsageError:
        raise
    except Exception as exc:  # PackError/UnitError from conversion: the user's input
        if isinstance(exc, ConcurError):
            raise UsageError(exc.render_body(), variable=key) from None
        raise
    if not var.choices and not in_bounds(var, value, slack=0.0):
        lo, hi = var.bounds
        rng = (
            f"[{'-inf' if lo is None else f'{lo / var.display.factor:g}'}, "
            f"{'inf' if hi is None else f'{hi / var.display.factor:g}'}] {var.display.text}".rstrip()
        )
        what = (
            f"is below its lower bound {lo / var.display.factor:g} {var.display.text}".rstrip()
            if lo is not None and value < lo
            else f"is outside its admissible range {rng}"
        )
        raise UsageError(f"{key}={raw} {what}", variable=key, hint=var.doc or None)
    if var.integer and not is_whole(value / var.unit.factor):
        raise UsageError(f"{key}={raw} must be a whole number", variable=key)
    return value


def _note_pick(
    catalog: Catalog, key: str, ident: str, column: str, given: dict[str, Any], model: Model, sets: str, out: Givens
) -> None:
    """What an answer says about a picked column: which one it assumed (shown when the value is
    used), or why the variable ``sets`` (the pick's, as the preset names it) stayed unset (shown
    instead of a bare 'give gpu_hour_price')."""
    pick = catalog.pick
    assert pick is not None
    var = model.variables.get(sets)
    if var is None or sets in given:
        return
    chosen = "given" if pick.by in given else f"the {catalog.name} catalog's default"
    entry = catalog.entries.get(ident)
    if entry is not None and column in entry.values:
        value, cite, _loc = entry.values[column]
        out.assumed[sets] = (
            f"assumed {sets} = {value:g} {catalog.fields[column].unit.text}: {column}'s list price for "
            f"{key}={ident} ({pick.by} {column}, {chosen}; {pick.by}=NAME picks another, {sets}=... "
            "gives your own)",
            f"{catalog.name} catalog, {ident} ({entry.name}), {pick.by} {column}: {cite}",
        )
        return
    others = listed_by(catalog, ident)
    out.unlisted[sets] = f"{key} {ident} has no list price at {column}" + (
        f" ({pick.by}s that list it: {', '.join(others)})"
        if others
        else f" (no {pick.by} in catalogs/{catalog.name}.yaml lists it)"
    )
