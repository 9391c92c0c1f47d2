"""A model: the union of the packs in play, with names resolved.

Packs compose through ``uses``; variables are shared by name (``rename`` maps a
used pack's name to ours). The model guarantees:

* every name an equation or constraint mentions is declared by some pack in play;
* a variable declared by several packs has one dimension (the first
  declaration, from the pack named first, wins for doc, default and display);
* choice comparisons (``attention == "mla"``) are resolved to numeric codes;
* ``key`` fingerprints the content of every pack in play (the sha256 of each file's bytes,
  never its path, size or mtime): caches of inverted forms key on it;
* a pack's ``uses:`` are resolved relative to that pack's own folder
  (:func:`concur.lang.library.find_used_pack`), never the working directory.

``build_model(refs, problems=[])`` is ``concur check``'s mode: instead of stopping at the first
problem it records each one (a ``uses:`` that does not resolve, a shared name with two
dimensions, each equation or constraint naming an undeclared variable or a wrong choice) and
leaves that item out, so the model it returns holds what is sound and can still be unit-checked.
An equation naming a variable whose own declaration failed (``Pack.broken``) is left out
silently: that problem is already recorded once.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..compiled import table
from ..errors import ConcurError, Location, PackError, UnitError, UnknownNameError
from ..records import record
from .expr import Cmp, Node, Num, Str, Var, map_tree, names_in, walk
from .library import find_pack, find_used_pack, get_pack, load_pack_file, pack_paths
from .pack import Constraint, Equation, Pack, Preset, Problems, Variable
from .units import format_dims

__all__ = ["Model", "build_model", "default_scenario"]


@record
class Model:
    """The packs in play composed into one system (see the module docstring for what it guarantees)."""

    packs: tuple[Pack, ...]
    variables: dict[str, Variable]
    equations: tuple[Equation, ...]
    constraints: tuple[Constraint, ...]
    presets: dict[str, tuple[Preset, ...]]  # key -> the catalogs it expands, the first is the dropdown's
    key: str

    @property
    def pack_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.packs)

    def variable(self, name: str) -> Variable:
        var = self.variables.get(name)
        if var is None:
            import difflib

            lower = {n.lower(): n for n in [*self.variables, *self.presets]}  # case-insensitive
            close = [lower[c] for c in difflib.get_close_matches(name.lower(), list(lower), n=3)]
            hint = (
                f"did you mean {', '.join(close)}?"
                if close
                else f"'concur show {' '.join(self.pack_names)}' lists the variables"
            )
            raise UnknownNameError(f"unknown variable '{name}' in pack(s) {', '.join(self.pack_names)}", hint=hint)
        return var


def _rename_tree(node: Node, mapping: dict[str, str]) -> Node:
    if not mapping:
        return node
    return map_tree(node, lambda n: Var(mapping[n.name]) if isinstance(n, Var) and n.name in mapping else None)


def _collect(refs: list[str], each: Problems) -> list[tuple[Pack, dict[str, str]]]:
    """Packs in play, each with the rename applied to reach it, top packs first."""
    out: list[tuple[Pack, dict[str, str]]] = []
    seen: set[str] = set()

    def visit(path: Path, rename: dict[str, str], stack: tuple[str, ...], where: Location | None) -> None:
        pack = load_pack_file(path, problems=each.sink)
        if pack.name in stack:
            raise PackError(f"packs use each other in a cycle: {' -> '.join(stack + (pack.name,))}", where=where)
        _refuse_merging_rename(pack, rename, where)
        if pack.name in seen:
            return
        seen.add(pack.name)
        out.append((pack, rename))
        places = pack.uses_where if len(pack.uses_where) == len(pack.uses) else (Location(pack.path),) * len(pack.uses)
        for (used, their_rename), loc in zip(pack.uses, places):
            combined = {k: rename.get(v, v) for k, v in their_rename.items()}
            for k, v in rename.items():
                combined.setdefault(k, v)
            with each.item():
                visit(find_used_pack(used, path.parent, where=loc), combined, stack + (pack.name,), loc)

    for ref in refs:
        visit(find_pack(ref), {}, (), None)
    return out


def _refuse_merging_rename(pack: Pack, rename: dict[str, str], where: Location | None) -> None:
    """A rename may give a used pack's variable the name another pack declares (that is how packs
    share), never the name of another variable of the same pack: ``uses: [{pack: p, rename: {a: b}}]``
    on a pack with ``b = 2 * a`` made ``b = 2 * b``, and ``b`` was answered 0 with exit 0."""
    ours: dict[str, str] = {}
    for name in pack.variables:
        new = rename.get(name, name)
        if new in ours:
            first, second = sorted((ours[new], name))
            raise PackError(
                f"the rename makes {pack.name}'s variables '{first}' and '{second}' one variable '{new}'",
                where=where,
                variable=new,
                hint=f"rename to a name {pack.name} does not declare",
            )
        ours[new] = name


def build_model(refs: list[str] | None = None, *, problems: list[ConcurError] | None = None) -> Model:
    """Compose the packs named (all shipped packs when empty) into a resolved model.

    With ``problems`` (a list), every independent problem is appended to it and the sound rest
    of the model is returned (see the module docstring); without, the first one is raised.
    """
    each = Problems(problems)
    refs = list(refs) if refs else list(pack_paths())
    collected = _collect(refs, each)
    memo_key = tuple((id(pack), tuple(sorted(rename.items()))) for pack, rename in collected)
    if problems is None:
        hit: tuple[tuple[Pack, ...], Model] | None = table("models", _BUILT_LIMIT).get(memo_key)
        if hit is not None and all(a is b for (a, _), b in zip(collected, hit[0])):
            return hit[1]
    model = _compose(collected, each)
    if problems is None and not each.sink:
        table("models", _BUILT_LIMIT).put(memo_key, (tuple(p for p, _ in collected), model))
    return model


# The composed model of each list of loaded packs, this process (the process table "models" of
# concur.compiled): a CLI question builds the same model several times (choosing the pack, its
# default scenario, the solve). Keyed by the Pack objects themselves (the library loads one object
# per file content and label), which the entry keeps alive so that their ids are not reused; a
# build collecting problems is never kept.
_BUILT_LIMIT = 256


def default_scenario(refs: list[str]) -> dict[str, Any]:
    """The embedded scenario of the packs ``refs``: the ``scenario:`` of the top-most pack that has one
    (a composition's own scenario, not the union of its parts': llm_fleet's traffic and model, not
    littles_law's hand-set step time)."""
    return next((dict(pack.scenario) for pack in build_model(refs).packs if pack.scenario), {})


def _compose(collected: list[tuple[Pack, dict[str, str]]], each: Problems) -> Model:
    """The model of the packs ``collected`` (top packs first, each with its rename)."""
    variables: dict[str, Variable] = {}
    equations: list[Equation] = []
    constraints: list[Constraint] = []
    broken: set[str] = set()
    digest = hashlib.sha256()
    for pack, rename in collected:
        digest.update(pack.name.encode() + b"\0" + pack.digest.encode() + b"\0")
        digest.update(repr(sorted(rename.items())).encode())
        broken.update(rename.get(name, name) for name in pack.broken)
        for name, var in pack.variables.items():
            ours = rename.get(name, name)
            if ours != name:
                var = replace(var, name=ours)
            prior = variables.get(ours)
            if prior is None:
                variables[ours] = var
            elif prior.unit.dims != var.unit.dims:
                with each.item():
                    raise UnitError(
                        f"variable '{ours}' is declared as '{prior.unit.text}' in {prior.where} "
                        f"but as '{var.unit.text}' ({format_dims(var.unit.dims)})",
                        where=var.where,
                        variable=ours,
                        hint="use one unit for a shared name, or rename it with uses: {pack: ..., rename: {...}}",
                    )
        for eq in pack.equations:
            equations.append(replace(eq, lhs=_rename_tree(eq.lhs, rename), rhs=_rename_tree(eq.rhs, rename)))
        for con in pack.constraints:
            constraints.append(replace(con, expr=_rename_tree(con.expr, rename)))
    presets = _preset_chains(collected, each)
    sound_eqs: list[Equation] = []
    for eq in equations:
        if eq.names & broken:
            continue  # its variable's declaration is already reported
        with each.item():
            for name in sorted(eq.names):
                if name not in variables:
                    raise PackError(
                        f"equation '{eq.text}' uses '{name}', which no pack in play declares",
                        where=eq.where,
                        variable=name,
                        hint="declare it under variables:",
                    )
            sound_eqs.append(
                replace(eq, lhs=_resolve_choices(eq.lhs, variables, eq), rhs=_resolve_choices(eq.rhs, variables, eq))
            )
    sound_cons: list[Constraint] = []
    for con in constraints:
        if names_in(con.expr) & broken:
            continue
        with each.item():
            for name in sorted(names_in(con.expr)):
                if name not in variables:
                    raise PackError(f"check '{con.text}' uses undeclared '{name}'", where=con.where, variable=name)
            sound_cons.append(replace(con, expr=_resolve_choices(con.expr, variables, con)))
    return Model(
        tuple(p for p, _ in collected), variables, tuple(sound_eqs), tuple(sound_cons), presets, digest.hexdigest()[:20]
    )


def _preset_chains(collected: list[tuple[Pack, dict[str, str]]], each: Problems) -> dict[str, tuple[Preset, ...]]:
    """Each preset key's catalogs in the order the packs build on each other (a used pack's catalog
    first: llm_memory's gpus before llm_fleet's prices), so the first is the one every entry is in;
    ``catalog: [gpus, prices]`` is two links. A ``fallback`` naming no preset in play is recorded."""
    presets: dict[str, tuple[Preset, ...]] = {}
    for pack, rename in reversed(collected):
        for key, preset in pack.presets.items():
            fields = {f: rename.get(v, v) for f, v in preset.fields.items()}
            for catalog in (preset.catalog, *preset.also):
                chain = presets.get(key, ())
                if all(p.catalog != catalog for p in chain):
                    presets[key] = chain + (replace(preset, catalog=catalog, fields=fields, also=()),)
    for key, chain in presets.items():
        fallback = next((p for p in chain if p.fallback), None)
        if fallback is not None and fallback.fallback not in presets:
            with each.item():
                raise PackError(
                    f"preset '{key}' falls back to '{fallback.fallback}', which no pack in play declares",
                    where=fallback.where,
                    hint=f"presets: {', '.join(sorted(k for k in presets if k != key))}",
                )
    return presets


def _resolve_choices(node: Node, variables: dict[str, Variable], owner: Equation | Constraint) -> Node:
    def fix(n: Node) -> Node | None:
        if isinstance(n, Cmp):
            left, right = n.left, n.right
            if isinstance(right, Var) and isinstance(left, Str):
                left, right = right, left
            if isinstance(right, Str):
                var = variables.get(left.name) if isinstance(left, Var) else None
                if var is None or not var.choices:
                    raise PackError(f"'{right.text}' can only be compared with a choice variable", where=owner.where)
                if right.text not in var.choices:
                    raise PackError(
                        f"'{right.text}' is not a choice of '{var.name}' ({', '.join(var.choices)})",
                        where=owner.where,
                        variable=var.name,
                    )
                return Cmp(n.op, left, Num(float(var.choices.index(right.text))))
        return None

    out = map_tree(node, fix)
    for n in walk(out):
        if isinstance(n, Str):
            raise PackError(f"text '{n.text}' is only allowed in a choice comparison", where=owner.where)
    return out


def pack_index() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Shipped pack name -> (every variable and preset key its model declares, its own and those of
    the packs it uses; the questions it answers by default): how a question naming no pack finds one."""
    out: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for name in pack_paths():
        model = build_model([name])
        out[name] = (frozenset(model.variables) | frozenset(model.presets), frozenset(get_pack(name).answers))
    return out
