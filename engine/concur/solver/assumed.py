"""What an answer assumed: the defaults and catalog values it used that nobody typed.

How it is designed, and why
---------------------------
An answer leans on inputs nobody gave: a pack's defaults (``tp`` = 1, ``utilization`` = 0.8) and
catalog values a preset brought along (a GPU's list price). Which of them are worth saying is data
in the packs, not a list of names here:

* a **variable** declared ``stated: true`` is named whenever the answer used its default;
* a **preset** declared ``stated: true`` (``weight_dtype: {catalog: dtypes, ..., stated: true}``)
  is named when it is not given and the answer used the defaults standing in for its fields,
  together with the catalog entry whose values they equal (``weight_dtype = bf16``,
  ``engine = default``);
* a preset declared ``stated: values`` (``gpu: {catalog: prices, stated: values}``) is also named
  when given: each value it filled from that catalog and the answer used, with the entry and the
  entry's source (a list price, its provider and date: an assumption even once the GPU is chosen).

"Used" means the solve read the default on its way to the answer or to a check it made: the trace
records it as a default step (a plan traces exactly the inputs it read), or -- for a goal seek,
whose trace records the searched variable without the equations it met -- an untraced variable
holding its default that an equation of the searched variable names. A variable merely declared
(another GPU family's efficiency) is never named.

Each :class:`Assumption` carries the one line printed under the answer (``note``; empty for the
fields a preset's line already covers) and the ``value``/``unit``/``source`` that ``--json``
prints under ``"assumed"`` and workbooks list on their Notes sheet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..compiled import compiled, table
from ..lang.library import get_catalog
from ..lang.model import Model
from ..lang.pack import Catalog, CatalogEntry, Preset
from ..lang.versions import current_version, fitted_versions
from ..records import record
from .roots import SAME_REL, close

if TYPE_CHECKING:
    from .givens import Givens
    from .plan import Step

__all__ = ["Assumption", "assumptions"]


@record
class Assumption:
    """One thing an answer assumed: a variable or preset ``name``, its ``value`` in the display
    unit (a number, or an id/choice text), that ``unit``, where it came from, and the printed line."""

    name: str
    value: Any
    unit: str
    source: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "source": self.source}


def _equation_names(model: Model) -> tuple[frozenset[str], ...]:
    """The names of each equation of ``model`` (walked once per model: a per-point sweep asks often)."""
    return compiled(model.key).once("assumed.equation_names", lambda: tuple(eq.names for eq in model.equations))


def _catalog(name: str) -> Catalog:
    """A catalog, looked up once per process."""
    catalogs = table("catalogs")
    hit: Catalog | None = catalogs.get(name)
    return hit if hit is not None else catalogs.put(name, get_catalog(name))


def _shown(model: Model, name: str, base: float) -> tuple[Any, str]:
    """(value in the display unit -- an int when whole and the variable is integer --, unit text)."""
    var = model.variables[name]
    if var.choices:
        return var.choices[int(base)], ""
    value: Any = base / var.display.factor
    if var.integer and float(value).is_integer():
        value = int(value)
    return value, var.display.text


def _text(value: Any, unit: str) -> str:
    number = f"{value:.6g}" if isinstance(value, float) else str(value)
    return f"{number} {unit}".strip()


def _same(a: float, b: float) -> bool:
    return close(a, b, SAME_REL)


def _fields(preset: Preset, catalog: Catalog, model: Model) -> list[tuple[str, str]]:
    """(catalog field, variable) pairs the preset fills in ``model``."""
    mapping = preset.fields or {f: f for f in catalog.fields}
    return [(f, v) for f, v in mapping.items() if f in catalog.fields and v in model.variables]


def _entry_value(catalog: Catalog, entry: CatalogEntry, field: str, model: Model, name: str) -> float | None:
    """The base-unit value ``entry`` gives ``name`` through ``field`` (None when it has none)."""
    if field not in entry.values:
        return None
    raw = entry.values[field][0]
    var = model.variables[name]
    if var.choices:
        return float(var.choices.index(raw)) if raw in var.choices else None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    return float(raw) * catalog.fields[field].unit.factor


def assumptions(model: Model, values: Mapping[str, float], givens: Givens, trace: Sequence[Step]) -> list[Assumption]:
    """Every stated default and stated preset value the answer used (see the module essay), presets
    first in the packs' order, then stated variables in declaration order."""
    steps = {s.variable: s for s in trace}
    searched = {s.variable for s in trace if s.method == "search" and s.eq is None}
    near_search = {n for names in _equation_names(model) if names & searched for n in names} if searched else set()

    def defaulted(name: str) -> bool:
        var = model.variables[name]
        if var.default is None or name not in values or name in givens.values:
            return False
        step = steps.get(name)
        if step is not None:
            return step.method == "default"
        return name in near_search and _same(values[name], var.default)

    out: list[Assumption] = []
    covered: set[str] = set()
    for key, chain in model.presets.items():
        for preset in chain:
            if preset.stated:
                for a in _preset_assumptions(model, key, preset, values, givens, defaulted, covered):
                    if a.name == key and any(b.name == key for b in out):  # a second catalog of the key
                        a = replace(a, name=f"{key}:{preset.catalog}")
                    out.append(a)
    out.extend(_picked(model, values, givens, trace, covered))
    for name, var in model.variables.items():
        if var.stated and name not in covered and defaulted(name):
            value, unit = _shown(model, name, values[name])
            out.append(
                Assumption(
                    name,
                    value,
                    unit,
                    f"the pack's default ({var.where})",
                    f"assumed {name} = {_text(value, unit)} (the pack's default; give {name} to change it)",
                )
            )
    return out


def _picked(
    model: Model, values: Mapping[str, float], givens: Givens, trace: Sequence[Step], covered: set[str]
) -> list[Assumption]:
    """A catalog column picked for the answer (a provider's price) that the answer read as an input:
    one it solved for (``gpu_hour_price`` a budget allows) is the answer, not an assumption."""
    read = {s.variable for s in trace if s.method in ("given", "preset", "default")}
    out: list[Assumption] = []
    for name, (note, source) in givens.assumed.items():
        if name in read and name in values and name not in covered:
            value, unit = _shown(model, name, values[name])
            covered.add(name)
            out.append(Assumption(name, value, unit, source, note))
    return out


def _preset_assumptions(
    model: Model,
    key: str,
    preset: Preset,
    values: Mapping[str, float],
    givens: Givens,
    defaulted: Any,
    covered: set[str],
) -> list[Assumption]:
    catalog = _catalog(preset.catalog)
    pairs = _fields(preset, catalog, model)
    out: list[Assumption] = []
    if key in givens.presets:
        version = _version_used(key, catalog, givens)
        if version is not None:
            out.append(version)
        if preset.stated != "values":
            return out
        ident = givens.presets[key]
        entry = catalog.entries.get(ident)
        if entry is None:
            return out
        for field, name in pairs:
            if name in covered or name not in values or givens.sources.get(name) != f"preset {key}={ident}":
                continue
            base = _entry_value(catalog, entry, field, model, name)
            if base is None or not _same(base, values[name]):
                continue  # filled by another catalog of the chain
            value, unit = _shown(model, name, values[name])
            covered.add(name)
            out.append(
                Assumption(
                    name,
                    value,
                    unit,
                    f"{catalog.name} catalog, {ident} ({entry.name}): {entry.values[field][1]}",
                    f"assumed {name} = {_text(value, unit)}: the {catalog.name} catalog's value for {key}={ident} "
                    f"({entry.name}); give {name} to change it",
                )
            )
        return out
    used = [(field, name) for field, name in pairs if name not in covered and defaulted(name)]
    if not used:
        return out
    match = next(
        (
            e
            for e in catalog.entries.values()
            if all(
                (b := _entry_value(catalog, e, field, model, name)) is not None and _same(b, values[name])
                for field, name in used
            )
        ),
        None,
    )
    shown = [(name, *_shown(model, name, values[name])) for _, name in used]
    what = (
        ", ".join(f"{name} = {_text(value, unit)}" for name, value, unit in shown)
        if len(shown) <= 3
        else ", ".join(name for name, _, _ in shown)
    )
    covered.update(name for _, name in used)
    if match is not None:
        release = current_version([_catalog(p.catalog) for p in model.presets[key]], match.id)
        ident = match.id if release is None else f"{match.id}@{release}"
        source = f"{catalog.name} catalog, {ident} ({match.name}): the pack's defaults equal its values"
        note = f"assumed {key} = {ident} ({match.name}) for {what} (the pack's defaults; give {key}=... to change it)"
        out.append(Assumption(key, ident, "", source, note))
    else:
        source = f"the pack's defaults for {key} (no {catalog.name} entry has these values)"
        note = f"assumed {what} (the pack's defaults, no {key} given; give {key}=... to change it)"
        out.append(Assumption(key, None, "", source, note))
    for name, value, unit in shown:
        where = model.variables[name].where
        out.append(Assumption(name, value, unit, f"the pack's default ({where}), standing for {key}"))
    return out


def _version_used(key: str, catalog: Catalog, givens: Givens) -> Assumption | None:
    """The release a given versioned preset (``engine=vllm``) was read as, said once: by the catalog
    whose entry states the ``version`` (see :mod:`concur.lang.versions`)."""
    used = givens.versions.get(key)
    ident = givens.presets[key]
    entry = catalog.entries.get(ident)
    if used is None or entry is None or "version" not in entry.values:
        return None
    release, typed = used
    fitted = fitted_versions([catalog], ident)
    current = str(entry.values["version"][0])
    releases = ", ".join(fitted)
    source = (
        f"{catalog.name} catalog, {ident} ({entry.name}): constants fitted on the measured runs of releases "
        f"{releases} together; {key}={ident} is {ident}@{current}, the newest of them"
    )
    if typed:
        note = (
            f"{key} = {ident}@{release}: the {catalog.name} catalog's {ident} constants, fitted on releases {releases}"
        )
    else:
        note = (
            f"assumed {key} = {ident}@{release}, the newest release the {catalog.name} catalog's {ident} constants "
            f"were fitted on (releases {releases}; give {key}={ident}@VERSION to name one)"
        )
    return Assumption(key, f"{ident}@{release}", "", source, note)
