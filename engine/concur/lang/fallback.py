"""Presets that stand for another preset unless given (``prefill_gpu`` is ``gpu`` until named).

A preset declared with ``fallback: OTHER`` (``prefill_gpu: {catalog: [gpus, prices], fields:
{hbm_bandwidth: prefill_hbm_bandwidth, ...}, fallback: gpu}``) fills its variables from its own
catalog entry when the givens name it. When they do not, each variable it would fill takes the
value held by the variable that OTHER's preset fills from the same field of the same catalog:
``prefill_hbm_bandwidth`` takes ``hbm_bandwidth``, whether ``gpu=`` put it there or the user typed
it. Invariants:

* a value given for the variable itself is never replaced;
* only values present are copied: a field OTHER left unset (no ``gpu`` given, or an entry without
  that field) leaves ours unset, to its default or the solver, exactly as OTHER's is;
* a choice is copied by its text, so the two variables' choice lists may differ in order;
* a value the fallback's preset filled reads as this preset's, with the fallback's id as its own
  (source ``preset prefill_gpu=h100-sxm-80gb``: the prefill GPU is the H100 ``gpu`` named); one typed
  for the fallback's variable reads ``as hbm_bandwidth`` (:data:`LENT`);
* a picked catalog (the price list) pairs the variables its ``sets`` fills through each preset's
  ``fields`` (``gpu_hour_price`` -> ``prefill_gpu_hour_price``);
* a variable the question asks for has no value to lend: ours then *follows* it, an equation
  ``ours = theirs`` for that question (:func:`following_model`), so asking for ``gpu_hour_price``
  without ``prefill_gpu`` prices both pools at the one answer. Only a pair whose choice lists
  differ cannot follow as a number, and that question is refused (:func:`asked_fallbacks`). Ours
  asked for as well is an unknown of its own (as it is when its lender is known), never made to
  follow: a question that solved the two apart is not turned into a contradiction.

The solver's givens (:func:`concur.solver.givens.resolve_givens`) and any caller that builds
base-unit givens without it (``concur plan``'s disaggregated rows) call :func:`fallback_values`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import replace

from .expr import Var
from .library import get_catalog
from .model import Model
from .pack import Equation, Preset

__all__ = [
    "LENT",
    "asked_fallbacks",
    "fallback_of",
    "fallback_pairs",
    "fallback_values",
    "following_model",
    "preset_targets",
]

LENT = "as "
"""Source prefix of a value lent from one typed for the fallback's variable (``as gpu_hour_price``):
no catalog entry stands behind it, so no preset column may replace it (a workbook keeps the value)."""


def preset_targets(preset: Preset) -> dict[str, str]:
    """Catalog field -> the variable ``preset`` fills from it (a picked catalog: its ``sets`` field)."""
    catalog = get_catalog(preset.catalog)
    names = [catalog.pick.sets] if catalog.pick is not None else list(catalog.fields)
    if preset.fields:
        return {f: preset.fields[f] for f in names if f in preset.fields}
    return {f: f for f in names}


def fallback_of(model: Model, key: str) -> str:
    """The preset key ``key`` falls back to when not given (``prefill_gpu`` -> ``gpu``), else ""."""
    return next((p.fallback for p in model.presets.get(key, ()) if p.fallback), "")


def fallback_pairs(model: Model, key: str) -> list[tuple[str, str]]:
    """``(ours, theirs)`` for preset ``key``: each variable it fills and the one its fallback fills from
    the same catalog field (empty when ``key`` has no fallback)."""
    chain = model.presets.get(key, ())
    other = fallback_of(model, key)
    if not other:
        return []
    pairs: list[tuple[str, str]] = []
    for preset in chain:
        theirs_preset = next((p for p in model.presets.get(other, ()) if p.catalog == preset.catalog), None)
        if theirs_preset is None:
            continue
        theirs = preset_targets(theirs_preset)
        for field, ours in preset_targets(preset).items():
            if field in theirs and theirs[field] != ours and {ours, theirs[field]} <= set(model.variables):
                pairs.append((ours, theirs[field]))
    return pairs


def fallback_values(
    model: Model, given: Collection[str], values: Mapping[str, float]
) -> dict[str, tuple[float, str, str]]:
    """The values fallback presets not named in ``given`` lend: ours -> (value, the variable it came
    from, the preset key that lends it). ``values``: base-unit givens so far (explicit ones and
    presets expanded); a name in ``given`` or already in ``values`` is left alone."""
    out: dict[str, tuple[float, str, str]] = {}
    for key in model.presets:
        if key in given:
            continue
        for ours, theirs in fallback_pairs(model, key):
            if ours in given or ours in values or theirs not in values:
                continue
            value = values[theirs]
            mine, src = model.variables[ours], model.variables[theirs]
            if mine.choices or src.choices:
                text = src.choices[int(value)] if src.choices else None
                if text is None or text not in mine.choices:
                    continue  # no choice of ours says the same: ours keeps its default
                value = float(mine.choices.index(text))
            out[ours] = (value, theirs, key)
    return out


def _asked_pairs(model: Model, given: Collection[str], find: Collection[str]) -> list[tuple[str, str, str]]:
    """``(key, ours, theirs)`` for each variable a fallback preset not given would take from a variable
    the question asks for (nothing can be lent), ``ours`` itself neither given nor asked for (asked
    for, it is an unknown of its own, as when its lender is known)."""
    out: list[tuple[str, str, str]] = []
    for key in model.presets:
        if key in given:
            continue
        for ours, theirs in fallback_pairs(model, key):
            if theirs in find and ours not in given and ours not in find:
                out.append((key, ours, theirs))
    return out


def _can_follow(model: Model, ours: str, theirs: str) -> bool:
    """Whether ``ours = theirs`` says what lending says: numbers are numbers, a choice is the same
    text only when both lists hold the same choices in the same order."""
    return model.variables[ours].choices == model.variables[theirs].choices


def asked_fallbacks(model: Model, given: Collection[str], find: Collection[str]) -> list[tuple[str, str, str]]:
    """``(key, ours, theirs)`` for each variable a fallback preset not given would take from a variable
    the question asks for, where ours cannot follow the answer as a number (two choice lists that
    differ): the question is refused rather than answered with ours at its default."""
    return [(k, o, t) for k, o, t in _asked_pairs(model, given, find) if not _can_follow(model, o, t)]


def following_model(model: Model, given: Collection[str], find: Collection[str]) -> Model:
    """``model`` with ``ours = theirs`` for each variable a fallback preset not given would take from a
    variable the question asks for (``prefill_gpu_hour_price = gpu_hour_price`` when the question asks
    for ``gpu_hour_price`` and names no ``prefill_gpu``): what is asked for has no value to lend, so
    ours follows it instead of staying unknown. Each equation is placed at the preset's declaration
    and numbered past the pack's last; the model's key covers them, so plans and caches of the
    model as written are never mixed with these. ``model`` itself when nothing follows."""
    pairs = [(k, o, t) for k, o, t in _asked_pairs(model, given, find) if _can_follow(model, o, t)]
    if not pairs:  # every question but the few that follow: nothing more to look at
        return model
    written = {eq.text for eq in model.equations}  # a model already following (a sweep's, solved per point)
    pairs = [(k, o, t) for k, o, t in pairs if f"{o} = {t}" not in written]
    if not pairs:
        return model
    added: list[Equation] = []
    for key, ours, theirs in pairs:
        preset = next(p for p in model.presets[key] if p.fallback)
        pack = next((p for p in model.packs if key in p.presets), model.packs[0])
        added.append(
            Equation(
                f"{ours} = {theirs}",
                Var(ours),
                Var(theirs),
                f"{key} is not given, so it is {preset.fallback} ({key} falls back to it): {ours} follows "
                f"{theirs}, which is asked for",
                preset.where,
                pack.name,
                1 + max((eq.index for eq in model.equations if eq.pack == pack.name), default=0) + len(added),
            )
        )
    salt = "\0".join(eq.text for eq in added)
    key = hashlib.sha256(f"{model.key}\0{salt}".encode()).hexdigest()[:20]
    return replace(model, equations=model.equations + tuple(added), key=key)
