"""The fleet plan's grid, narrowed: the one rule ``concur plan --gpus/--tp/...`` and a workbook
definition's ``plan:`` entry both follow.

Invariants: an axis the narrowing does not name (or names with an empty list) keeps every value of
:func:`concur.analysis.fleet_plan.default_axes`; every id named is checked against its catalog (an
engine may name a fitted release, ``vllm@0.10``, per :mod:`concur.lang.versions`) before anything
is sized; a value named twice is sized once; a TP is a whole number of at least 1 and at most the
fleet pack's bound on ``tp`` (1,024); naming weight or KV dtypes replaces the default
(weights, KV) pairs by every pair of the named ones. An error carries ``field`` (the key of
:data:`AXIS_KEYS` it concerns) and no option text: the presenter says which flag or key that is.

Worked example: ``narrow_axes(model, {"tp": [4], "engines": ["default"]})`` keeps every GPU and
the three default dtype pairs, and sizes TP 4 on the default engine only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConcurError, UnknownNameError, UsageError
from ..lang.library import get_catalog
from ..lang.model import Model
from ..lang.versions import resolve_version, split_id
from .fleet_plan import LAYOUTS, default_axes
from .providers import plan_providers

__all__ = ["AXIS_KEYS", "narrow_axes"]

AXIS_KEYS = ("gpus", "tp", "weight_dtypes", "kv_dtypes", "engines", "layouts")
"""What a question may narrow, by the names ``concur plan``'s options and a ``plan:`` entry use."""


def narrow_axes(
    model: Model, narrow: Mapping[str, Sequence[Any]], provider: str | None = None, model_id: Any = None
) -> dict[str, list[Any]]:
    """The default grid of the fleet pack ``model`` for the served model ``model_id`` (an MoE model's
    grid has TP 16 and the expert-parallel layouts) with each axis ``narrow`` names replaced by its
    values (keys :data:`AXIS_KEYS`; ``layouts`` may also widen a dense model's); ``provider`` picks
    whose list prices (``all``: every provider's).

    Raises :class:`UnknownNameError` for an id no catalog lists and :class:`UsageError` for an
    unknown key or a TP under 1, each with ``field`` set to the key concerned.
    """
    bad = sorted(set(narrow) - set(AXIS_KEYS))
    if bad:
        raise UsageError(f"unknown key '{bad[0]}'", hint=f"allowed: {', '.join(AXIS_KEYS)}", field=bad[0])
    narrow = {key: list(dict.fromkeys(values)) for key, values in narrow.items()}  # a value named twice is sized once
    axes = default_axes(model, {"model": model_id})
    layouts = _known_layouts([str(n) for n in narrow.get("layouts", ())])
    if layouts:
        axes["layouts"] = layouts
    if provider:
        axes["provider"] = plan_providers(provider)
    for key, axis, catalog in (("gpus", "gpu", "gpus"), ("engines", "engine", "engines")):
        names = [str(n) for n in narrow.get(key, ())]
        if names:
            axes[axis] = _known_ids(names, axis, catalog, key)
    tps = list(narrow.get("tp", ()))
    if tps:
        if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in tps):
            raise UsageError(
                f"TP values are whole numbers of at least 1, got {_listed(tps)}",
                hint="e.g. 1, 2, 4, 8",
                kind="tp_values",
                field="tp",
            )
        most = model.variables["tp"].bounds[1] or math.inf
        over = [t for t in tps if t > most]
        if over:  # 1 to 4,999 was 1.1 million configurations, sized for minutes
            raise UsageError(
                f"TP values are at most {most:,.0f} (the fleet pack's bound), got {_listed(over)}",
                hint="e.g. 1, 2, 4, 8",
                kind="tp_values",
                field="tp",
            )
        axes["tp"] = tps
    if narrow.get("weight_dtypes") or narrow.get("kv_dtypes"):
        axes["dtypes"] = _dtype_pairs(narrow, axes["dtypes"])
    return axes


def _listed(values: Sequence[Any], most: int = 8) -> str:
    """``values`` comma-separated, the first ``most`` of them and how many more."""
    shown = ", ".join(map(str, values[:most]))
    return shown if len(values) <= most else f"{shown} ... ({len(values):,} values)"


def _known_layouts(names: list[str]) -> list[str]:
    """``names`` checked against the MoE layouts (:data:`concur.analysis.fleet_plan.LAYOUTS`)."""
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown:
        raise UnknownNameError(f"unknown layout '{unknown[0]}'", hint=f"known: {', '.join(LAYOUTS)}", field="layouts")
    return names


def _dtype_pairs(narrow: Mapping[str, Sequence[Any]], default: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (weights, KV) dtype pairs ``narrow`` names, each side defaulting to the default grid's."""
    dtypes = get_catalog("dtypes").entries
    chosen = {}
    for key, fallback in (
        ("weight_dtypes", sorted({a for a, _ in default})),
        ("kv_dtypes", sorted({b for _, b in default})),
    ):
        names = [str(n) for n in narrow.get(key, ())]
        unknown = [d for d in names if d not in dtypes]
        if unknown:
            raise UnknownNameError(f"unknown dtype '{unknown[0]}'", hint=f"known: {', '.join(dtypes)}", field=key)
        chosen[key] = names or fallback
    return [(a, b) for a in chosen["weight_dtypes"] for b in chosen["kv_dtypes"]]


def _known_ids(names: list[str], axis: str, catalog: str, key: str) -> list[str]:
    """``names`` checked against ``catalog`` (engines: a release the constants were fitted on)."""
    known = get_catalog(catalog).entries
    unknown = [n for n in names if split_id(n)[0] not in known]
    if unknown:
        raise UnknownNameError(f"unknown {axis} '{unknown[0]}'", hint=f"known: {', '.join(known)}", field=key)
    for name in names:
        try:
            resolve_version([get_catalog(catalog)], axis, *split_id(name))
        except ConcurError as exc:
            exc.field = key
            raise
    return names
