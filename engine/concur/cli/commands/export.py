"""``concur export``: solve a scenario and write it as a live ``.xlsx`` workbook.

Two forms:

* ``concur export [PACK...] [--scenario FILE] [--find X] [--set NAME=VALUE] -o FILE.xlsx``
  solves exactly like ``concur solve`` and writes the solution's workbook;
* ``concur export workbooks/NAME.yaml`` reads a *workbook definition* and
  writes ``workbooks/NAME.xlsx`` beside it (``-o`` overrides the path).

A workbook definition (YAML, loaded safely)::

    title: LLM capacity plan
    doc: one paragraph shown on the Notes sheet
    packs: [llm_memory, packs/llm_capacity.yaml]   # names, or paths relative to this file
    given: {model: llama-3.1-70b, gpu: h100-sxm-80gb, tp: 4, context: 8192 token}
    find: [users, replicas]
    sweeps:
      - {name: tp, over: tp, values: [1, 2, 4, 8], outputs: [users], x: tp, y: users, title: Users by TP}
    scenarios:
      - {name: fp8 KV, set: {kv_bytes: 1}, doc: fp8 KV cache}
    plan: {engines: [default]}   # fleet packs: a Plan sheet comparing configurations (concur plan)
    search_up_to: 64             # a searched count's table runs to 64 (default: 4x the answer, >= 16 rows)

Sweep values and scenario overrides are numbers in the variable's display unit
or ``"NUMBER UNIT"`` text. Errors are :class:`concur.errors.UsageError` (exit 2,
one line); the file is written atomically, so a failure leaves no partial file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ...errors import UsageError
from ..options import find_option, json_option, pack_path_option, set_option

__all__ = [
    "WorkbookDefinition",
    "command",
    "export_definition",
    "load_definition",
    "plan_for",
    "solve_definition",
]

_DEF_KEYS = {"title", "doc", "packs", "given", "find", "sweeps", "scenarios", "plan", "search_up_to"}
_SWEEP_KEYS = {"name", "over", "values", "outputs", "x", "y", "title", "log_x"}
_SCENARIO_KEYS = {"name", "set", "doc"}


@dataclass(frozen=True)
class WorkbookDefinition:
    """A parsed workbook definition; ``packs`` are names or resolved paths."""

    path: Path
    title: str
    doc: str | None
    packs: tuple[str, ...]
    given: dict[str, Any]
    find: tuple[str, ...]
    sweeps: tuple[dict[str, Any], ...]
    scenarios: tuple[dict[str, Any], ...]
    plan: dict[str, Any] | None = None
    search_up_to: int | None = None


def _fail(path: Path, where: Any, message: str, hint: str | None = None) -> UsageError:
    loc = f"{path}" if where is None else f"{where}"
    return UsageError(f"{loc}: {message}", hint=hint)


def _named_file(ref: str, folder: Path, where: Any) -> Path:
    """A pack path a definition names, by the one confinement rule every named file meets
    (:func:`concur.lang.library.find_used_pack`): inside the definition's folder or a --pack-path."""
    from ...errors import PackError
    from ...lang.library import find_used_pack

    try:
        return find_used_pack(ref, folder, where=where, owner="workbook definition").resolve()
    except PackError as exc:  # the definition is the user's input: exit 2
        raise UsageError(exc.render_body(), where=exc.where) from None


def load_definition(path: str | Path) -> WorkbookDefinition:
    """Read and validate a workbook definition (see the module docstring)."""
    from ...lang.yamlsafe import YMap, load_yaml

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"workbook definition '{path}' does not exist", hint="give a path to a .yaml file")
    data = load_yaml(path)
    if not isinstance(data, YMap):
        raise _fail(path, None, "a workbook definition is a mapping with title, packs, given, find")
    unknown = sorted(set(data) - _DEF_KEYS)
    if unknown:
        raise _fail(
            path, data.where(unknown[0]), f"unknown key '{unknown[0]}'", hint=f"allowed: {', '.join(sorted(_DEF_KEYS))}"
        )
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        raise _fail(path, None, "'title' must be non-empty text")
    packs = data.get("packs") or []
    if isinstance(packs, str):
        packs = [packs]
    if not isinstance(packs, list) or not packs or not all(isinstance(p, str) for p in packs):
        raise _fail(
            path,
            data.where("packs") if "packs" in data else None,
            "'packs' must be a non-empty list of pack names or .yaml paths",
        )
    resolved = []
    places = packs.where if hasattr(packs, "where") else (lambda i: data.where("packs"))
    for i, p in enumerate(packs):
        if p.endswith((".yaml", ".yml")) or "/" in p:
            resolved.append(str(_named_file(p, path.parent, places(i))))
        else:
            resolved.append(p)
    given = data.get("given") or {}
    if not isinstance(given, dict):
        raise _fail(path, data.where("given"), "'given' must map NAME: VALUE")
    find = data.get("find") or []
    if isinstance(find, str):
        find = [f.strip() for f in find.split(",") if f.strip()]
    if not isinstance(find, list) or not find or not all(isinstance(f, str) for f in find):
        raise _fail(path, data.where("find") if "find" in data else None, "'find' must list the variables to solve for")
    sweeps = data.get("sweeps") or []
    scenarios = data.get("scenarios") or []
    for kind, items, keys in (("sweep", sweeps, _SWEEP_KEYS), ("scenario", scenarios, _SCENARIO_KEYS)):
        if not isinstance(items, list):
            raise _fail(path, None, f"'{kind}s' must be a list")
        for item in items:
            if not isinstance(item, dict) or "name" not in item:
                raise _fail(path, None, f"each {kind} is a mapping with a name")
            bad = sorted(set(item) - keys)
            if bad:
                raise _fail(
                    path,
                    getattr(item, "where", lambda k: None)(bad[0]),
                    f"{kind} '{item['name']}' has unknown key '{bad[0]}'",
                    hint=f"allowed: {', '.join(sorted(keys))}",
                )
    from ..givens import check_units

    check_units(given, str(path))
    for item in scenarios:
        if isinstance(item.get("set"), dict):
            check_units(item["set"], str(path))
    doc = data.get("doc")
    fleet = data.get("plan")
    if fleet is not None and not isinstance(fleet, dict):
        raise _fail(path, data.where("plan"), "'plan' must map axis: [values] (e.g. engines: [default])")
    up_to = data.get("search_up_to")
    if up_to is not None and (isinstance(up_to, bool) or not isinstance(up_to, int) or up_to < 1):
        raise _fail(
            path,
            data.where("search_up_to"),
            f"'search_up_to' must be a whole number of at least 1, not {up_to!r}",
            hint="the largest count a searched answer's table holds, e.g. search_up_to: 64",
        )
    return WorkbookDefinition(
        path,
        title.strip(),
        " ".join(doc.split()) if isinstance(doc, str) else None,
        tuple(resolved),
        dict(given),
        tuple(find),
        tuple(dict(s) for s in sweeps),
        tuple(dict(s) for s in scenarios),
        None if fleet is None else dict(fleet),
        up_to,
    )


def _display(model: Any, plan: Any, name: str, raw: Any, what: str) -> float:
    """``raw`` (a number in the model's display unit, or ``"NUMBER UNIT"``) in the unit the sheet shows."""
    from ...lang.values import convert_value

    var = model.variable(name)
    if var.choices:
        raise UsageError(f"{what}: '{name}' is a choice variable; sweeps and scenarios take numbers", variable=name)
    shown = next((i.var for i in plan.inputs if i.var.name == name), None)
    scale: float = shown.scale if shown is not None else var.display.factor
    return convert_value(raw, var) / scale


def plan_for(
    model: Any,
    sol: Any,
    title: str,
    sweeps: tuple[dict[str, Any], ...] = (),
    scenarios: tuple[dict[str, Any], ...] = (),
    doc: str | None = None,
    search_up_to: int | None = None,
) -> Any:
    """The WorkbookPlan of ``sol`` with definition-style sweeps and scenarios.

    Sweep values and overrides are converted to the unit each input shows on the sheet (the
    unit its given was typed in, see :func:`concur.excel.from_solution.typed_input`).
    """
    from dataclasses import replace

    from ...excel.from_solution import plan_from_solution
    from ...excel.plan import Scenario, Sweep

    plan = plan_from_solution(sol, title, doc=doc, search_up_to=search_up_to)
    shown_units = {i.var.name: i.var.unit for i in plan.inputs}
    sw_out = []
    for s in sweeps:
        over = str(s.get("over", s["name"]))
        values = s.get("values")
        if not isinstance(values, list) or not values:
            raise UsageError(f"sweep '{s['name']}' needs a non-empty list of values")
        outputs = s.get("outputs") or list(sol.find)
        outputs = [outputs] if isinstance(outputs, str) else list(outputs)
        nums = tuple(_display(model, plan, over, v, f"sweep '{s['name']}'") for v in values)
        unit = shown_units.get(over, model.variable(over).display.text)
        sw_out.append(
            Sweep(
                str(s["name"]),
                over,
                nums,
                tuple(outputs),
                str(s.get("x", f"{over} [{unit}]" if unit else over)),
                str(s.get("y", ", ".join(outputs))),
                str(s.get("title", f"{', '.join(outputs)} vs {over}")),
                bool(s.get("log_x", False)),
            )
        )
    sc_out = []
    for s in scenarios:
        sets = s.get("set") or {}
        if not isinstance(sets, dict):
            raise UsageError(f"scenario '{s['name']}': 'set' must map NAME: VALUE")
        sc_out.append(
            Scenario(
                str(s["name"]),
                {k: _display(model, plan, k, v, f"scenario '{s['name']}'") for k, v in sets.items()},
                str(s.get("doc", "") or ""),
            )
        )
    return replace(plan, sweeps=sw_out, scenarios=sc_out)


def solve_definition(defn: WorkbookDefinition) -> tuple[Any, Any]:
    """(model, solution) for a workbook definition."""
    from ...lang.model import build_model
    from ...solver.question import solve_model

    model = build_model(list(defn.packs))
    return model, solve_model(model, defn.find, defn.given)


def export_definition(path: str | Path, out: str | Path | None = None, search_up_to: int | None = None) -> Path:
    """Solve a workbook definition and write its workbook (default: beside it, ``.xlsx``);
    ``search_up_to`` overrides the definition's."""
    from ...excel.writer import write_workbook

    defn = load_definition(path)
    model, sol = solve_definition(defn)
    up_to = search_up_to if search_up_to is not None else defn.search_up_to
    plan = plan_for(model, sol, defn.title, defn.sweeps, defn.scenarios, doc=defn.doc, search_up_to=up_to)
    if defn.plan is not None:
        from dataclasses import replace

        from ...excel.plan_sheet import fleet_comparison

        plan = replace(plan, comparison=fleet_comparison(defn.given, defn.plan, f"{defn.path}: plan"))
    target = Path(out) if out is not None else defn.path.with_suffix(".xlsx")
    return write_workbook(plan, target)


@click.command("export")
@pack_path_option
@click.argument("packs", nargs=-1)
@find_option()
@set_option()
@click.option(
    "--scenario",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE|-",
    help="YAML file with given: {NAME: VALUE} ('-': stdin)",
)
@click.option("--title", default=None, help="workbook title (default: the packs' names)")
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    metavar="FILE.xlsx|-",
    help="the .xlsx to write (required unless the argument is a workbook definition; '-': stdout, not a terminal)",
)
@click.option(
    "--search-up-to",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="a searched count (replicas, servers) is picked live from candidates up to N "
    "(default: 4x the answer, at least 16 rows); past N the sheet says 'out of range'",
)
@json_option
def command(
    packs: tuple[str, ...],
    find: tuple[str, ...],
    sets: tuple[str, ...],
    scenario: str | None,
    title: str | None,
    output: str | None,
    search_up_to: int | None,
    as_json: bool,
) -> None:
    """Solve and write a live Excel workbook (every result a formula).

    \b
    concur export llm_memory --find users --set model=llama-3.1-70b --set tp=4 -o cap.xlsx
    concur export workbooks/llm_capacity.yaml      (writes workbooks/llm_capacity.xlsx)
    """
    from ...extras import need
    from ..streams import binary_output, is_stdio

    need("openpyxl", "concur export")  # before any solving: the one line naming concur[excel]
    if output is not None and not is_stdio(output) and not output.lower().endswith(".xlsx"):
        raise UsageError(f"output '{output}' must end in .xlsx", hint="e.g. -o plan.xlsx, or -o - for stdout")
    if as_json and is_stdio(output):
        raise UsageError("-o - and --json would both write stdout", hint="write the workbook to a file")
    if len(packs) == 1 and packs[0].endswith((".yaml", ".yml")) and not find and not sets and not scenario:
        path = Path(packs[0])
        if path.is_file() and _is_definition(path):
            defn = load_definition(path)
            target = output or str(defn.path.with_suffix(".xlsx"))
            with binary_output(target, ".xlsx") as staged:
                export_definition(path, staged, search_up_to)
            _save_caches(None)
            _report(as_json, target, defn.title, list(defn.packs), list(defn.find))
            return
    if output is None:
        raise UsageError("no output file", hint="add -o FILE.xlsx (or -o - for stdout)")
    from ...excel.from_solution import plan_from_solution
    from ...excel.writer import write_workbook
    from ..givens import solve_question

    sol = solve_question(packs, find, sets, scenario)
    model = sol.model
    plan = plan_from_solution(sol, title or " + ".join(model.pack_names), search_up_to=search_up_to)
    with binary_output(output, ".xlsx") as staged:
        write_workbook(plan, staged)
    _save_caches(model)
    _report(as_json, output, plan.title, list(model.pack_names), list(sol.find))


def _report(as_json: bool, written: str, title: str, packs: list[str], find: list[str]) -> None:
    """What was written: a line, or (``--json``) ``{"wrote", "title", "packs", "find"}``; nothing for stdout."""
    from ..streams import is_stdio

    if as_json:
        click.echo(json.dumps({"wrote": written, "title": title, "packs": packs, "find": find}, indent=2))
    elif not is_stdio(written):
        click.echo(f"wrote {written}")


def _is_definition(path: Path) -> bool:
    """A workbook definition has a title and a find list (a scenario file has neither title)."""
    from ...lang.yamlsafe import YMap, load_yaml

    data = load_yaml(path)
    return isinstance(data, YMap) and "title" in data and "find" in data


def _save_caches(model: Any) -> None:
    from ...solver.question import flush_caches

    if model is not None:
        flush_caches(model)
