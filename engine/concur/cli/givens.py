"""From command-line words to a question: ``--set`` pairs, scenario files, and the solve itself.

The rule for a value (:mod:`concur.lang.values`) is applied later, by the solver, to what this
module collects: ``--set`` keeps a plain number a number (read in the variable's display unit,
the unit ``concur show`` prints) and everything else text (``"8192 token"``, ``8k``, a preset
id). A scenario file is the same mapping written as YAML, so ``--set x=3`` and ``given: {x: 3}``
mean the same thing. ``--scenario -`` reads the scenario from stdin.

Every problem here is the user's input: :class:`concur.errors.UsageError` (exit 2).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import PackError, UnderdeterminedError, UsageError
from ..lang.model import default_scenario
from ..lang.units import check_given_units
from .hints import for_cli

__all__ = ["default_scenario", "load_scenario", "parse_sets", "solve_question", "split_names"]

_SCENARIO_KEYS = frozenset({"given", "packs", "find"})


def parse_sets(items: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs; a plain number stays a number (the variable's display unit).

    >>> parse_sets(("tp=4", "context=8192 token", "mem_util=0.9"))
    {'tp': 4, 'context': '8192 token', 'mem_util': 0.9}
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set '{item}' is not NAME=VALUE", hint='e.g. --set context="8192 token"')
        name, value = item.split("=", 1)
        name, value = name.strip(), value.strip()
        if not name:
            raise UsageError(f"--set '{item}' has no name")
        try:
            number = float(value.replace("_", ""))
            out[name] = int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number
        except ValueError:
            out[name] = value
    return out


def split_names(values: tuple[str, ...]) -> tuple[str, ...]:
    """``("a,b", "c")`` -> ``("a", "b", "c")``: repeated options and comma lists are the same thing."""
    out: list[str] = []
    for v in values:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return tuple(out)


def load_scenario(path: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """A scenario file (``-``: stdin): ``given:`` values, optional ``packs:`` and ``find:``.

    Read like a pack (a regular file, size, depth and node limits: a FIFO or ``/dev/zero`` is
    refused at once); every problem is a :class:`UsageError` (exit 2). ``packs:`` entries
    resolve like a pack's ``uses:``, relative to the scenario's folder (the working directory
    for stdin) and are returned as paths.
    """
    from ..lang.library import find_used_pack
    from ..lang.yamlsafe import YList, YMap, load_yaml
    from .streams import read_input

    data_in, label = read_input(path)
    folder = Path.cwd() if data_in is not None else Path(path).parent
    try:
        data = load_yaml(label, text=data_in, label=label)
    except PackError as exc:  # a scenario is the user's input: exit 2, not a failed check
        raise UsageError(exc.render_body(), where=exc.where) from None
    if not isinstance(data, YMap) or not isinstance(data.get("given", {}), dict):
        raise UsageError(f"{label}: a scenario is a mapping with given: {{NAME: VALUE}}")
    _refuse_unknown_keys(data)
    packs = data.get("packs") or []
    find = data.get("find") or []
    if isinstance(packs, str):
        packs = [packs]
    if isinstance(find, str):
        find = [f.strip() for f in find.split(",")]
    for key, value in (("packs", packs), ("find", find)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{data.where(key)}: '{key}' must be a name or a list of names")
    places = packs.where if isinstance(packs, YList) else (lambda i: data.where("packs"))
    try:
        packs = [str(find_used_pack(ref, folder, where=places(i), owner="scenario")) for i, ref in enumerate(packs)]
    except PackError as exc:
        raise UsageError(exc.render_body(), where=exc.where) from None
    given = data.get("given") or {}
    _check_given_values(given, label)
    check_given_units(given, label)
    return dict(given), list(packs), list(find)


def _refuse_unknown_keys(data: Any) -> None:
    """A scenario's keys are given, packs and find: a misspelt ``given:`` was ignored, and the packs'
    defaults answered instead of its values."""
    unknown = sorted(str(k) for k in data if k not in _SCENARIO_KEYS)
    if unknown:
        raise UsageError(
            f"{data.where(unknown[0])}: unknown key(s) {unknown} in a scenario; allowed: {', '.join(sorted(_SCENARIO_KEYS))}",
            hint="a scenario holds given: {NAME: VALUE} and optionally packs: and find:",
        )


def _check_given_values(given: Any, label: str) -> None:
    """Each value a number or text, and a number finite (``.nan``, ``.inf``, ``1e400`` are refused
    where they are written, as --set's are)."""
    from ..lang.yamlsafe import YMap

    for name, value in given.items():
        where = given.where(name) if isinstance(given, YMap) else label
        if not isinstance(value, (int, float, str)) or isinstance(value, bool):
            raise UsageError(f"{where}: '{name}' must be a number or text such as '8192 token'")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{where}: {name}: {value} is not a finite number", variable=name)


def solve_question(
    packs: tuple[str, ...],
    find: tuple[str, ...],
    sets: tuple[str, ...],
    scenario: str | None,
    *,
    default_find: tuple[str, ...] = (),
) -> Any:
    """The one path from command-line words to a :class:`concur.solver.solution.Solution` (solve, export).

    Givens come from the scenario file, then ``--set`` (which wins); packs from the arguments,
    else the scenario, else the shipped packs declaring the targets; with neither ``--set``
    nor a scenario the packs' embedded scenario is used. The rest is :func:`concur.api.solve`:
    this only merges the command line's words.
    """
    from ..api import packs_for, solve

    given: dict[str, Any] = {}
    pack_list = list(packs)
    targets = split_names(find)
    if find and not targets:
        raise UsageError("--find names no variable", hint="e.g. --find users")
    embedded = scenario == "default" or (not sets and not scenario)
    if scenario and scenario != "default":
        s_given, s_packs, s_find = load_scenario(scenario)
        given.update(s_given)
        pack_list = pack_list or s_packs
        targets = targets or tuple(s_find)
    if not targets:
        targets = default_find if not pack_list else ()
        if not targets:
            raise UsageError("nothing to solve for", hint="add --find VARIABLE")
    sets_given = parse_sets(sets)
    if not pack_list:
        pack_list = packs_for(
            targets, {**given, **sets_given}, (lambda name: default_scenario([name])) if embedded else None
        )
    if embedded:  # the packs' own scenario, less what is asked for: --find arrival_rate keeps the rest
        given = {k: v for k, v in default_scenario(pack_list).items() if k not in targets}
    given.update(sets_given)
    try:
        return solve(targets, given, pack_list)
    except UnderdeterminedError as exc:
        raise for_cli(exc, scenario_hint=not embedded and bool(default_scenario(pack_list))) from None
