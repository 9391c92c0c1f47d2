"""From command-line words to a question: ``--set`` pairs, scenario files, and the solve itself.

The rule for a value (:mod:`concur.lang.values`) is applied later, by the solver, to what this
module collects: ``--set`` keeps a plain number a number (read in the variable's display unit,
the unit ``concur show`` prints) and everything else text (``"8192 token"``, ``8k``, a preset
id). A scenario file is the same mapping written as YAML, so ``--set x=3`` and ``given: {x: 3}``
mean the same thing. ``--scenario -`` reads the scenario from stdin.

Every problem here is the user's input: :class:`concur.errors.UsageError` (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PackError, UnderdeterminedError, UsageError

__all__ = ["check_units", "default_scenario", "load_scenario", "parse_sets", "solve_question", "split_names"]


def check_units(given: Any, label: str) -> None:
    """Refuse, at its ``file:line``, a text value of ``given`` (a scenario's or a workbook
    definition's mapping) whose unit is over the bounds every unit text meets before pint reads
    it (:func:`concur.lang.units.unit_problem`); everything else about a value is the solver's."""
    from ..lang.units import quantity_unit, unit_problem

    for name, value in given.items():
        unit = quantity_unit(value) if isinstance(value, str) else None
        problem = unit_problem(unit) if unit else None
        if unit and problem is not None:
            where = given.where(name) if hasattr(given, "where") else label
            shown = unit if len(unit) <= 60 else f"{unit[:40]}...{unit[-12:]}"
            raise UsageError(f"{where}: unit '{shown}' of '{name}' {problem}")


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
    for name, value in given.items():
        if not isinstance(value, (int, float, str)) or isinstance(value, bool):
            where = given.where(name) if isinstance(given, YMap) else label
            raise UsageError(f"{where}: '{name}' must be a number or text such as '8192 token'")
    check_units(given, label)
    return dict(given), list(packs), list(find)


def default_scenario(packs: list[str]) -> dict[str, Any]:
    """The embedded scenario of the packs in play: the ``scenario:`` of the top-most pack that has one
    (a composition's own scenario, not the union of its parts': llm_fleet's traffic and model, not
    littles_law's hand-set step time)."""
    from ..lang.model import build_model

    return next((dict(pack.scenario) for pack in build_model(packs).packs if pack.scenario), {})


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
        raise with_flags(exc, scenario_hint=not embedded and bool(default_scenario(pack_list))) from None


def with_flags(exc: UnderdeterminedError, *, scenario_hint: bool = False) -> UnderdeterminedError:
    """The engine's refusal as the command line says it: the ``--set`` that fixes a throughput
    question, and (where the packs embed a scenario) how to start from it."""
    from ..solver.throughput_inputs import UnfixedThroughputError

    parts = [exc.hint] if exc.hint else []
    if isinstance(exc, UnfixedThroughputError):
        parts.append("give " + " ".join(f"--set {n}=..." for n in exc.missing) + " (or sweep one with --over)")
    elif scenario_hint:
        parts.append("or start from the embedded scenario: --scenario default --set NAME=VALUE")
    else:
        return exc
    return type(exc)(exc.message, missing=exc.missing, hint="; ".join(parts), where=exc.where, variable=exc.variable)
