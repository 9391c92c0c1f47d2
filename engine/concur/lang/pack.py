"""Packs and catalogs as frozen, self-validating data.

A pack file is read once (:mod:`concur.lang.yamlsafe`), validated key by key, and
turned into :class:`Pack` with :class:`Variable`, :class:`Equation`,
:class:`Constraint`, :class:`Example` and :class:`Preset` records that remember
their ``file:line:col``. Nothing downstream touches raw YAML. Units are parsed
here, once per variable; formulas are parsed by :mod:`concur.lang.expr`.

Invariants of a loaded pack:

* the file is a pack: a mapping whose ``pack:`` is an identifier equal to the file stem.
  Until that holds nothing of the file is quoted in an error (no lines, no keys), so
  pointing concur at a file that is not a pack never leaks what the file holds;
* every name (pack, variable, preset, catalog, rename) is an ASCII identifier; variables are
  unreserved and have a parseable unit;
* choices and catalog entry ids are distinct one-line texts that survive a spreadsheet's
  list validation (no ``,`` or ``"``, no leading ``= + - @``, no control characters);
* every constraint is a condition (a comparison, or and/or/not of them);
  defaults and bounds are stored in **base units**;
* every equation parsed under the whitelist; names it uses are *not* yet
  checked (a pack may rely on variables of the packs it ``uses``): the model
  does that once all packs are loaded.

Loading stops at the first problem, except for ``concur check``, which passes a ``problems``
list: then each variable, equation, constraint, preset and example is validated on its own, a
bad one is recorded and left out, and loading goes on, so one run reports every independent
problem of a file. Such a pack is *partial* (``broken`` names the variables whose declarations
failed, so their equations are not blamed a second time) and is never cached or solved. Only a
file that is not a pack at all (no ``pack: NAME`` mapping, invalid YAML) stops at once.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path
from typing import Any, cast

from ..errors import ConcurError, Location, PackError, UnitError
from ..records import record
from .expr import (
    RESERVED_NAMES,
    Cmp,
    Logic,
    Node,
    name_problem,
    names_in,
    parse_equation,
    parse_expression,
)
from .units import UnitInfo, unit_info
from .values import convert_value
from .yamlsafe import YList, YMap, load_yaml, read_source

__all__ = [
    "TEMPLATE_FIELD",
    "Catalog",
    "CatalogEntry",
    "CatalogField",
    "CatalogPick",
    "Constraint",
    "Equation",
    "Example",
    "Expectation",
    "Pack",
    "Preset",
    "Variable",
    "list_item_problem",
    "load_catalog",
    "load_pack",
]


TEMPLATE_FIELD = re.compile(r"\{([A-Za-z][A-Za-z0-9_]*)\}")
"""A ``{name}`` in a ``violation:`` message: the value of variable ``name``, filled when it is shown."""


@record
class Variable:
    """A declared quantity. ``default`` and ``bounds`` are in base units."""

    name: str
    unit: UnitInfo
    display: UnitInfo
    doc: str
    where: Location
    pack: str
    default: float | None = None
    default_text: str | None = None
    bounds: tuple[float | None, float | None] = (None, None)
    integer: bool = False
    choices: tuple[str, ...] = ()
    limit: str | None = None
    violation: str | None = None
    stated: bool = False  # an answer that leans on this variable's default says so (headroom, utilization)


@record
class Equation:
    """``lhs = rhs``; ``names`` is every variable the equation mentions."""

    text: str
    lhs: Node
    rhs: Node
    doc: str
    where: Location
    pack: str
    index: int

    @property
    def names(self) -> frozenset[str]:
        return names_in(self.lhs) | names_in(self.rhs)

    @property
    def key(self) -> str:
        return f"{self.pack}#{self.index}"


@record
class Constraint:
    """A condition a solution must satisfy (``attention_heads % tp == 0``). ``input``: a failure means
    the givens describe something that cannot exist (a layout), an input error, not a scenario
    that saturates or does not fit."""

    text: str
    expr: Node
    doc: str
    where: Location
    pack: str
    input: bool = False
    violation: str | None = None  # the failure's message; its {name}s are variables the check names


@record
class Expectation:
    """An example's expected value for one variable, with its unit and tolerances."""

    value: float | str
    unit: str | None
    rel: float
    abs: float | None


@record
class Example:
    """A worked example: givens, what to find, and what the answers must be (or the error expected)."""

    name: str
    given: dict[str, Any]
    find: tuple[str, ...]
    expect: dict[str, Expectation]
    where: Location
    pack: str
    error: str | None = None  # expected error class name for examples of refusals


@record
class Preset:
    """``--set KEY=ID`` expands catalog entry ID; ``fields`` maps catalog field -> variable.

    ``also``: further catalogs the same id expands in (``catalog: [gpus, prices]``: a GPU's specs
    and its price), with the same ``fields`` (a picked catalog's ``sets`` is its field name).
    ``fallback``: another preset key (``gpu``); when KEY is not given, every variable KEY would fill
    takes the value the fallback's preset gave the same catalog field (its entry's, or one typed
    for it), so ``prefill_gpu`` is ``gpu`` unless given (:mod:`concur.lang.fallback`)."""

    key: str
    catalog: str
    fields: dict[str, str]
    where: Location
    # "defaults": an answer that used its fields' defaults names the entry they equal (no key given);
    # "values": also, when given, the values it filled (a list price is an assumption); "": neither
    stated: str = ""
    also: tuple[str, ...] = ()
    fallback: str = ""


@record
class Pack:
    """One loaded pack file (see the module docstring for its invariants)."""

    name: str
    doc: str
    path: str
    uses: tuple[tuple[str, dict[str, str]], ...]
    variables: dict[str, Variable]
    equations: tuple[Equation, ...]
    constraints: tuple[Constraint, ...]
    examples: tuple[Example, ...]
    presets: dict[str, Preset]
    scenario: dict[str, Any] = field(default_factory=dict)
    uses_where: tuple[Location, ...] = ()  # where each ``uses`` entry is written
    digest: str = ""  # sha256 of the file's bytes (models and caches key on content)
    broken: tuple[str, ...] = ()  # variables whose declarations failed (partial packs of concur check only)
    answers: tuple[str, ...] = ()  # questions it answers by default: --find X with no pack named picks it


_PACK_KEYS = {
    "pack",
    "doc",
    "uses",
    "presets",
    "variables",
    "equations",
    "constraints",
    "examples",
    "scenario",
    "version",
    "references",
    "answers",
}
_VAR_KEYS = {
    "unit",
    "doc",
    "default",
    "bounds",
    "integer",
    "display",
    "choices",
    "limit",
    "violation",
    "source",
    "stated",
}


class Problems:
    """Where a loader records a bad item and goes on (``sink`` is a list), or raises at once (None)."""

    def __init__(self, sink: list[ConcurError] | None) -> None:
        self.sink = sink

    @contextmanager
    def item(self) -> Iterator[None]:
        """Run the block; with a sink, a :class:`PackError`/:class:`UnitError` is recorded, not raised."""
        if self.sink is None:
            yield
            return
        try:
            yield
        except (PackError, UnitError) as exc:
            self.sink.append(exc)


def _require(cond: bool, message: str, where: Location, hint: str | None = None, variable: str | None = None) -> None:
    if not cond:
        raise PackError(message, where=where, hint=hint, variable=variable)


def _mapping(container: YMap, key: str, what: str) -> YMap:
    """``container[key]`` as a YMap (an empty one when absent or null); refuses other types."""
    value = container.get(key)
    if value is None:
        empty = YMap()
        empty.loc, empty.key_loc = container.where(key), {}
        return empty
    if not isinstance(value, YMap):  # _require's check, written out so the type checker sees it
        raise PackError(f"'{key}' must be a mapping of {what}", where=container.where(key))
    return value


def _listing(container: YMap, key: str, what: str) -> YList:
    value = container.get(key)
    if value is None:
        empty = YList()
        empty.loc, empty.item_loc = container.where(key), []
        return empty
    if not isinstance(value, YList):
        raise PackError(f"'{key}' must be a list of {what}", where=container.where(key))
    return value


def _number(value: Any, what: str, where: Location) -> float:
    _require(isinstance(value, (int, float)) and not isinstance(value, bool), f"{what} must be a number", where)
    return float(value)


def _text(value: Any, what: str, where: Location) -> str:
    if not isinstance(value, str):
        raise PackError(f"{what} must be text, got {type(value).__name__}", where=where)
    return value


def _identifier(value: Any, what: str, where: Location) -> str:
    """``value`` as an ASCII identifier (a name, never a path); PackError otherwise."""
    if not isinstance(value, str):
        raise PackError(f"{what} must be a name, got {type(value).__name__}", where=where)
    problem = name_problem(value, what)
    _require(problem is None, problem or "", where)
    return value


_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"})


def list_item_problem(item: Any) -> str | None:
    """Why ``item`` cannot be a choice or catalog id (None when it can).

    Choices become items of a spreadsheet dropdown (a list validation written as ``"a,b,c"``),
    and ids are typed on command lines: a comma splits an item in two, a quote ends the list,
    a leading ``= + - @`` makes a spreadsheet read a formula, control characters corrupt a
    terminal, and format characters (bidi overrides, zero-width marks: Unicode ``Cf``), line and
    paragraph separators, private-use and unassigned code points make two ids look alike or one
    look like another.
    """
    if not isinstance(item, str) or not item.strip():
        return "must be non-empty text"
    bad = [c for c in item if c in ',"' or ord(c) < 32 or 127 <= ord(c) < 160]
    if bad:
        return f"contains {bad[0]!r}, which breaks a spreadsheet list or a terminal"
    hidden = [c for c in item if unicodedata.category(c) in _INVISIBLE]
    if hidden:
        return (
            f"contains U+{ord(hidden[0]):04X} ({unicodedata.name(hidden[0], 'unnamed')}), an invisible or "
            "text-direction character that makes it look like another text"
        )
    if item[0] in "=+-@" or item != item.strip():
        return "must not start with = + - @ or a space (a spreadsheet would read a formula)"
    return None


def _variable_spec(name: str, spec: Any, where: Location) -> YMap:
    """The variable's mapping (empty for ``name:`` alone), once its name is allowed and every key known."""
    _identifier(name, "variable name", where)
    _require(
        name not in RESERVED_NAMES,
        f"'{name}' is reserved (sympy or spreadsheets misread it)",
        where,
        "choose another name",
    )
    if spec is None:
        spec = YMap()
        spec.loc, spec.key_loc = where, {}
    _require(isinstance(spec, YMap), f"variable '{name}' must be a mapping like {{unit: s, doc: ...}}", where)
    unknown = set(spec) - _VAR_KEYS
    _require(
        not unknown,
        f"unknown key(s) {sorted(unknown)} in variable '{name}'",
        where,
        f"allowed: {', '.join(sorted(_VAR_KEYS))}",
    )
    return cast(YMap, spec)


def _choices(name: str, spec: YMap) -> tuple[str, ...]:
    """A choice variable's names: a non-empty list of distinct list-safe names, and no unit."""
    if "choices" not in spec:
        return ()
    raw = spec["choices"]
    _require(
        isinstance(raw, YList) and len(raw) > 0 and all(isinstance(c, str) for c in raw),
        f"choices of '{name}' must be a list of names",
        spec.where("choices"),
    )
    for i, choice in enumerate(raw):
        problem = list_item_problem(choice)
        _require(problem is None, f"choice {i + 1} of '{name}' {problem}", raw.where(i))
        _require(choice not in raw[:i], f"choice '{choice}' of '{name}' is listed twice", raw.where(i))
    _require("unit" not in spec, f"choice variable '{name}' cannot have a unit", spec.where("unit"))
    return tuple(raw)


def _variable_units(name: str, spec: YMap) -> tuple[UnitInfo, UnitInfo]:
    """The variable's unit and display unit (the unit unless given), which must share dimensions."""
    unit_text = spec.get("unit", "")
    unit_text = "" if unit_text is None else str(unit_text)
    unit = unit_info(unit_text, where=spec.where("unit"), variable=name)
    display = unit_info(str(spec["display"]), where=spec.where("display"), variable=name) if "display" in spec else unit
    if display.dims != unit.dims:
        raise UnitError(
            f"display unit '{display.text}' does not match unit '{unit.text}'",
            where=spec.where("display"),
            variable=name,
        )
    return unit, display


def _variable_flags(name: str, spec: YMap) -> tuple[str | None, bool, bool]:
    """``limit`` (at_least, at_most or none), ``integer`` and ``stated`` (which needs a default)."""
    limit = spec.get("limit")
    _require(
        limit in (None, "at_least", "at_most"), f"limit of '{name}' must be at_least or at_most", spec.where("limit")
    )
    integer = spec.get("integer", False)
    _require(isinstance(integer, bool), f"integer of '{name}' must be true or false", spec.where("integer"))
    stated = spec.get("stated", False)
    _require(isinstance(stated, bool), f"stated of '{name}' must be true or false", spec.where("stated"))
    _require(
        not stated or "default" in spec,
        f"'{name}' is stated but has no default",
        spec.where("stated"),
        "stated: true makes answers mention the default they used; give the variable a default",
    )
    return limit, integer, stated


def _variable_bounds(name: str, spec: YMap, proto: Variable) -> tuple[float | None, float | None]:
    """``bounds: [low, high]`` in base units (null for an open end; low <= high)."""
    if "bounds" not in spec:
        return (None, None)
    raw = spec["bounds"]
    _require(
        isinstance(raw, YList) and len(raw) == 2,
        f"bounds of '{name}' must be [low, high]",
        spec.where("bounds"),
        "use null for an open end",
    )
    lo, hi = (None if b is None else convert_value(b, proto, spec.where("bounds")) for b in raw)
    _require(lo is None or hi is None or lo <= hi, f"bounds of '{name}' are reversed", spec.where("bounds"))
    return (lo, hi)


def _variable(name: str, spec: Any, pack: str, where: Location) -> Variable:
    """One declared variable, every field checked in the order the keys are documented."""
    spec = _variable_spec(name, spec, where)
    choices = _choices(name, spec)
    unit, display = _variable_units(name, spec)
    limit, integer, stated = _variable_flags(name, spec)
    proto = Variable(name, unit, display, str(spec.get("doc", "") or ""), where, pack, choices=choices)
    default = None
    default_text = None
    if "default" in spec and spec["default"] is not None:
        default_text = str(spec["default"])
        default = convert_value(spec["default"], proto, spec.where("default"))
    bounds = _variable_bounds(name, spec, proto)
    violation = spec.get("violation")
    return Variable(
        name,
        unit,
        display,
        proto.doc,
        where,
        pack,
        default,
        default_text,
        bounds,
        integer,
        choices,
        limit,
        None if violation is None else _text(violation, "violation", spec.where("violation")),
        stated,
    )


def load_pack(
    path: str | Path,
    *,
    label: str | None = None,
    text: str | None = None,
    content: bytes | None = None,
    problems: list[ConcurError] | None = None,
) -> Pack:
    """Load and validate one pack file. Raises :class:`PackError`/:class:`UnitError` with file:line:col.

    ``content`` is the file's bytes when the caller has read them already (so that the bytes
    it keys a cache on are the bytes parsed); ``text`` is a pack that has no file (its name is
    then not compared with a file name). With ``problems`` (a list), every independent problem
    is appended to it and a partial pack returned (see the module docstring).
    """
    path = Path(path)
    name_label = label or str(path)
    if text is None and content is None:
        content = read_source(path, label=name_label)
    raw = content if content is not None else (text or "").encode("utf-8")
    data = load_yaml(path, text=content if content is not None else text, label=name_label)
    top = Location(name_label, 1, 1)
    _require(
        isinstance(data, YMap) and isinstance(data.get("pack"), str),
        "not a concur pack: a pack is a YAML mapping that starts with 'pack: NAME'",
        top,
    )
    each = Problems(problems)
    name = _pack_name(data, path if text is None else None, top, each)
    doc = str(data.get("doc", "") or "")
    uses, uses_where = _uses(data, each)
    variables, broken = _variables(data, name, each)
    equations = _equations(data, name, each)
    constraints = _constraints(data, name, each)
    presets = _presets(data, each)
    examples = tuple(_examples(data, name, each))
    scenario = dict(_section(each, _mapping, data, "scenario", "name -> value"))
    answers = data.get("answers") or []
    _require(
        isinstance(answers, list) and all(isinstance(a, str) for a in answers),
        "'answers' must be a list of variable names",
        data.where("answers"),
    )
    return Pack(
        name,
        doc,
        name_label,
        tuple(uses),
        variables,
        tuple(equations),
        tuple(constraints),
        examples,
        presets,
        scenario,
        tuple(uses_where),
        hashlib.sha256(raw).hexdigest(),
        broken,
        tuple(answers),
    )


def _pack_name(data: YMap, path: Path | None, top: Location, each: Problems) -> str:
    """The ``pack:`` name, an identifier equal to the file's name (``path``; None for a pack
    given as text); every top-level key must be known."""
    name: str = data["pack"]
    _require(name_problem(name) is None, "'pack:' must be an ASCII identifier", data.where("pack"))
    if path is not None:
        with each.item():
            _require(
                name == path.stem,
                f"pack name '{name}' must equal the file name '{path.stem}'",
                data.where("pack"),
                f"rename the file to {name}.yaml or the pack to {path.stem}",
            )
    unknown = set(data) - _PACK_KEYS
    with each.item():
        _require(
            not unknown,
            f"unknown top-level key(s) {sorted(unknown)}",
            data.where(sorted(unknown)[0]) if unknown else top,
            f"allowed: {', '.join(sorted(_PACK_KEYS))}",
        )
    return name


def _uses(data: YMap, each: Problems) -> tuple[list[tuple[str, dict[str, str]]], list[Location]]:
    """``uses:``: each used pack with its renames, and where each entry is written."""
    uses: list[tuple[str, dict[str, str]]] = []
    uses_where: list[Location] = []
    raw_uses = _section(each, _listing, data, "uses", "pack names")
    for i, item in enumerate(raw_uses):
        with each.item():
            uses.append(_use(item, raw_uses.where(i)))
            uses_where.append(raw_uses.where(i))
    return uses, uses_where


def _variables(data: YMap, pack: str, each: Problems) -> tuple[dict[str, Variable], tuple[str, ...]]:
    """``variables:``: the declared variables, and the names whose declaration failed (``broken``)."""
    variables: dict[str, Variable] = {}
    raw_vars = _section(each, _mapping, data, "variables", "name -> {unit, doc, ...}")
    for vname, spec in raw_vars.items():
        with each.item():
            variables[vname] = _variable(vname, spec, pack, raw_vars.where(vname))
    return variables, tuple(str(v) for v in raw_vars if v not in variables)


def _equations(data: YMap, pack: str, each: Problems) -> list[Equation]:
    """``equations:``, numbered from 1 in the order written."""
    equations: list[Equation] = []
    raw_eqs = _section(each, _listing, data, "equations", "equations")
    for i, item in enumerate(raw_eqs):
        with each.item():
            equations.append(_equation(item, raw_eqs.where(i), pack, i + 1))
    return equations


def _constraints(data: YMap, pack: str, each: Problems) -> list[Constraint]:
    """``constraints:``, the checks an answer must pass."""
    constraints: list[Constraint] = []
    raw_cons = _section(each, _listing, data, "constraints", "{check, doc} entries")
    for i, item in enumerate(raw_cons):
        with each.item():
            constraints.append(_constraint(item, raw_cons.where(i), pack))
    return constraints


def _presets(data: YMap, each: Problems) -> dict[str, Preset]:
    """``presets:``, each key naming a catalog."""
    presets: dict[str, Preset] = {}
    raw_presets = _section(each, _mapping, data, "presets", "key -> {catalog: NAME}")
    for key, spec in raw_presets.items():
        with each.item():
            presets[key] = _preset(key, spec, raw_presets.where(key))
    return presets


def _section(each: Problems, kind: Any, data: YMap, key: str, what: str) -> Any:
    """``kind(data, key, what)`` (:func:`_mapping` or :func:`_listing`); empty when it is malformed and recorded."""
    with each.item():
        return kind(data, key, what)
    holder = YMap()  # recorded: go on as if the section were empty
    holder.loc, holder.key_loc = data.where(key), {}
    return kind(holder, key, what)


def _use(item: Any, loc: Location) -> tuple[str, dict[str, str]]:
    rename: dict[str, str] = {}
    if isinstance(item, str):
        ref = item
    else:
        _require(
            isinstance(item, YMap) and isinstance(item.get("pack"), str),
            "each 'uses' entry is a pack name or {pack: NAME, rename: {theirs: ours}}",
            loc,
        )
        ref, rename = item["pack"], item.get("rename") or {}
        _require(
            isinstance(rename, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in rename.items()),
            "rename must map their variable names to ours",
            loc,
        )
        for theirs, ours in rename.items():
            _identifier(theirs, "renamed variable", loc)
            _identifier(ours, "variable name", loc)
    _require(ref.strip() != "" and "\0" not in ref, "a 'uses' entry names a pack or a .yaml file", loc)
    return ref, dict(rename)


def _equation(item: Any, loc: Location, pack: str, index: int) -> Equation:
    eq_doc = ""
    if isinstance(item, YMap):
        extra = set(item) - {"eq", "doc", "source"}
        _require("eq" in item and not extra, "an equation entry is text or {eq: TEXT, doc: TEXT}", loc)
        text_eq, eq_doc, loc = item["eq"], str(item.get("doc", "") or ""), item.where("eq")
        loc = Location(loc.file, loc.line, (loc.col or 1) + 4) if loc.line is not None else loc
    else:
        text_eq = item
    text_eq = _text(text_eq, "an equation", loc)
    lhs, rhs = parse_equation(text_eq, where=loc)
    return Equation(text_eq.strip(), lhs, rhs, eq_doc, loc, pack, index)


def _constraint(item: Any, loc: Location, pack: str) -> Constraint:
    _require(
        isinstance(item, YMap) and isinstance(item.get("check"), str),
        "a constraint is {check: CONDITION, doc: TEXT}",
        loc,
    )
    node = parse_expression(item["check"], where=item.where("check"), allow_compare=True)
    _require(
        isinstance(node, (Cmp, Logic)),
        f"check '{item['check']}' is not a condition",
        item.where("check"),
        "write a comparison such as 'a <= b' (combine with and / or / not)",
    )
    flag = item.get("input", False)
    _require(isinstance(flag, bool), "a constraint's input is true or false", item.where("check"))
    violation = item.get("violation")
    if violation is not None:
        where = item.where("violation")
        _require(isinstance(violation, str) and bool(violation.strip()), "a constraint's violation is a message", where)
        unknown = sorted(set(TEMPLATE_FIELD.findall(violation)) - names_in(node))
        _require(
            not unknown,
            f"the violation message names {', '.join(unknown)}, which the check does not",
            where,
            "name in {braces} only variables of the check: they are the values its failure holds",
        )
    doc = str(item.get("doc", "") or "")
    return Constraint(item["check"], node, doc, item.where("check"), pack, flag, violation)


def _preset(key: str, spec: Any, loc: Location) -> Preset:
    _identifier(key, "preset name", loc)
    raw = spec.get("catalog") if isinstance(spec, YMap) else None
    listed = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    names: list[str] = [n for n in listed if isinstance(n, str)]
    _require(
        len(names) > 0 and len(names) == len(listed),
        f"preset '{key}' must be {{catalog: NAME (or [NAME, ...]), fields: {{field: variable}}}}",
        loc,
    )
    for name in names:
        _identifier(name, "catalog name", spec.where("catalog"))
    fallback = spec.get("fallback", "")
    _require(isinstance(fallback, str), f"fallback of preset '{key}' must name another preset", loc)
    if fallback:
        _identifier(fallback, "preset name", spec.where("fallback"))
        _require(fallback != key, f"preset '{key}' cannot fall back to itself", spec.where("fallback"))
    fields = spec.get("fields") or {}
    _require(
        isinstance(fields, dict) and all(isinstance(v, str) for v in fields.values()),
        f"fields of preset '{key}' must map catalog field -> variable",
        loc,
    )
    stated = spec.get("stated", False)
    _require(
        stated in (True, False, "values"),
        f"stated of preset '{key}' must be true (name the defaults standing for it) or 'values' "
        "(also name the values it fills when given)",
        loc,
    )
    return Preset(
        key,
        names[0],
        dict(fields),
        loc,
        "values" if stated == "values" else "defaults" if stated else "",
        tuple(names[1:]),
        fallback,
    )


def _examples(data: YMap, pack: str, each: Problems) -> list[Example]:
    out = []
    raw = _section(each, _listing, data, "examples", "{name, given, find, expect} entries")
    for i, item in enumerate(raw):
        with each.item():
            out.append(_example(item, raw.where(i), pack, i))
    return out


def _example(item: Any, loc: Location, pack: str, i: int) -> Example:
    _require(isinstance(item, YMap), "an example is {name, given, find, expect}", loc)
    given = _mapping(item, "given", "name -> value")
    find = item.get("find") or []
    if isinstance(find, str):
        find = [f.strip() for f in find.split(",")]
    _require(
        isinstance(find, list) and len(find) > 0 and all(isinstance(f, str) for f in find),
        "example 'find' must name at least one variable",
        item.where("find"),
    )
    expect: dict[str, Expectation] = {}
    raw_expect = _mapping(item, "expect", "name -> value")
    for key, val in raw_expect.items():
        at = raw_expect.where(key)
        if isinstance(val, YMap):
            _require(isinstance(val.get("value"), (int, float, str)), f"expected '{key}' needs a value", at)
            unit = val.get("unit")
            _require(unit is None or isinstance(unit, str), f"unit of expected '{key}' must be text", at)
            expect[key] = Expectation(
                val["value"],
                unit,
                _number(val.get("rel", 1e-6), "rel", at),
                None if val.get("abs") is None else _number(val["abs"], "abs", at),
            )
        else:
            _require(
                isinstance(val, (int, float, str)) and not isinstance(val, bool),
                f"expected '{key}' must be a number or text",
                at,
            )
            expect[key] = Expectation(val, None, 1e-6, None)
    return Example(
        str(item.get("name", f"example {i + 1}")), dict(given), tuple(find), expect, loc, pack, item.get("error")
    )


# ---------------------------------------------------------------- catalogs


@record
class CatalogField:
    """A column of a catalog: its name, unit and meaning."""

    name: str
    unit: UnitInfo
    doc: str


@record
class CatalogEntry:
    """One preset. ``values`` maps field -> (raw value in the field's unit, source, location)."""

    id: str
    name: str
    values: dict[str, tuple[Any, str, Location]]
    where: Location


@record
class CatalogPick:
    """``pick: {by, sets, default}``: the catalog's fields are alternatives for one variable.

    The given named ``by`` (``--set provider=lambda``) picks which field of the chosen entry
    fills the variable ``sets``; without it, the field ``default``. An entry that lacks the
    picked field leaves ``sets`` unset -- never filled from another field."""

    by: str
    sets: str
    default: str
    where: Location


@record
class Catalog:
    """A catalog file: its fields and its entries by id (``pick``: see :class:`CatalogPick`)."""

    name: str
    doc: str
    path: str
    fields: dict[str, CatalogField]
    entries: dict[str, CatalogEntry]
    pick: CatalogPick | None = None


def load_catalog(
    path: str | Path,
    *,
    label: str | None = None,
    content: bytes | None = None,
    problems: list[ConcurError] | None = None,
) -> Catalog:
    """Load a catalog; every numeric value must carry a non-empty ``source``; its name (an
    identifier) equals the file name; entry ids are valid list items (:func:`list_item_problem`).
    With ``problems``, each bad field, entry value or source is recorded there and left out."""
    path = Path(path)
    label = label or str(path)
    data = load_yaml(path, text=content, label=label)
    top = Location(label, 1, 1)
    _require(
        isinstance(data, YMap) and isinstance(data.get("catalog"), str),
        "not a concur catalog: a catalog is a YAML mapping that starts with 'catalog: NAME'",
        top,
    )
    name = _identifier(data["catalog"], "catalog name", data.where("catalog"))
    each = Problems(problems)
    with each.item():
        _require(
            name == path.stem, f"catalog name '{name}' must equal the file name '{path.stem}'", data.where("catalog")
        )
    fields: dict[str, CatalogField] = {}
    raw_fields = _section(each, _mapping, data, "fields", "field -> {unit, doc}")
    for fname, spec in raw_fields.items():
        with each.item():
            spec = spec or {}
            _require(isinstance(spec, dict), f"field '{fname}' must be {{unit, doc}}", raw_fields.where(fname))
            unit = unit_info(str(spec.get("unit") or ""), where=raw_fields.where(fname), variable=fname)
            fields[fname] = CatalogField(fname, unit, str(spec.get("doc", "") or ""))
    entries: dict[str, CatalogEntry] = {}
    raw_entries = _section(each, _mapping, data, "entries", "id -> {field: {value, source}}")
    for eid, spec in raw_entries.items():
        loc = raw_entries.where(eid)
        with each.item():
            problem = list_item_problem(eid)
            _require(problem is None, f"entry id {problem}", loc)
            _require(isinstance(spec, YMap), f"entry '{eid}' must be a mapping", loc)
            values: dict[str, tuple[Any, str, Location]] = {}
            for fname, val in spec.items():
                if fname in ("name", "doc", "notes", "sources", "source", "aliases"):
                    continue
                with each.item():
                    values[fname] = _catalog_value(eid, fname, val, spec.where(fname), raw_fields)
            entries[str(eid)] = CatalogEntry(str(eid), str(spec.get("name", eid)), values, loc)
    pick = None
    if data.get("pick") is not None:
        with each.item():
            pick = _catalog_pick(data["pick"], data.where("pick"), fields)
    return Catalog(name, str(data.get("doc", "") or ""), label, fields, entries, pick)


def _catalog_pick(spec: Any, loc: Location, fields: dict[str, CatalogField]) -> CatalogPick:
    _require(
        isinstance(spec, dict) and all(isinstance(spec.get(k), str) for k in ("by", "sets", "default")),
        "pick must be {by: GIVEN, sets: VARIABLE, default: FIELD}",
        loc,
    )
    by = _identifier(spec["by"], "pick.by", loc)
    sets = _identifier(spec["sets"], "pick.sets", loc)
    _require(
        spec["default"] in fields,
        f"pick.default '{spec['default']}' is not a field of the catalog",
        loc,
        f"fields: {', '.join(fields)}",
    )
    return CatalogPick(by, sets, str(spec["default"]), loc)


def _catalog_value(eid: str, fname: str, val: Any, floc: Location, declared: Any) -> tuple[Any, str, Location]:
    _require(fname in declared, f"entry '{eid}' has field '{fname}' not declared under 'fields'", floc)
    _require(isinstance(val, YMap) and "value" in val, f"'{eid}.{fname}' must be {{value: ..., source: ...}}", floc)
    source = val.get("source")
    _require(
        isinstance(source, str) and source.strip() != "",
        f"'{eid}.{fname}' has no source",
        floc,
        "every number in a catalog cites where it comes from",
    )
    return val["value"], source, floc
