"""Workbook definitions: a YAML file that names packs, givens, targets, sweeps and scenarios, read,
solved and written as one live workbook (``concur export workbooks/NAME.yaml``).

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

Sweep values and scenario overrides are numbers in the variable's display unit or ``"NUMBER UNIT"``
text. Invariants: every problem is a :class:`concur.errors.UsageError` (exit 2, one line naming the
file, and the line where the YAML gives one); a named pack file is confined like a pack's ``uses:``
(:func:`concur.lang.library.find_used_pack`); the fleet plan of a ``plan:`` entry is computed once,
here, and handed to the Plan sheet finished (:func:`fleet_plan_of`); a definition exported
again with the same inputs replays its remembered plan and printed formulas without solving or
importing sympy (:mod:`concur.excel.memo`), and writes the same bytes; the file is written
atomically, so a failure leaves no partial file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..analysis.fleet_axes import AXIS_KEYS, narrow_axes
from ..analysis.fleet_memo import plan_fleet_once
from ..analysis.fleet_plan import AXES, FleetPlan
from ..analysis.prefill_prices import cross_gpus
from ..errors import ConcurError, PackError, UsageError
from ..lang.library import find_used_pack, recording
from ..lang.model import build_model
from ..lang.units import check_given_units
from ..lang.values import convert_value
from ..lang.yamlsafe import YMap, load_yaml
from ..solver.question import solve_model
from .plan import Scenario, Sweep

__all__ = [
    "WorkbookDefinition",
    "export_definition",
    "fleet_plan_of",
    "is_definition",
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
    try:
        return find_used_pack(ref, folder, where=where, owner="workbook definition").resolve()
    except PackError as exc:  # the definition is the user's input: exit 2
        raise UsageError(exc.render_body(), where=exc.where) from None


def load_definition(path: str | Path) -> WorkbookDefinition:
    """Read and validate a workbook definition (see the module docstring)."""
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
    check_given_units(given, str(path))
    for item in scenarios:
        if isinstance(item.get("set"), dict):
            check_given_units(item["set"], str(path))
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
    from .from_solution import plan_from_solution  # sympy: only when a workbook is made

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
    sol = solve_model(build_model(list(defn.packs)), defn.find, defn.given)
    return sol.model, sol  # the model solved: with the equations a question adds (lang.fallback)


def fleet_plan_of(defn: WorkbookDefinition) -> FleetPlan | None:
    """The fleet plan a definition's ``plan:`` entry asks for (None without one): its question is
    the definition's, less the axes the plan compares (GPU, TP, dtypes, engine); the entry narrows
    them (:func:`concur.analysis.fleet_axes.narrow_axes`). Computed once for the same inputs
    (:func:`concur.analysis.fleet_memo.plan_fleet_once`). Errors name ``FILE: plan.KEY``."""
    if defn.plan is None:
        return None
    where = f"{defn.path}: plan"
    narrow: dict[str, list[Any]] = {}
    for key, value in defn.plan.items():
        items = value if isinstance(value, list) else [value]
        if not items:
            raise UsageError(f"{where}.{key}: an empty list", hint="name at least one value, or leave the key out")
        if str(key) not in PLAN_KEYS:
            raise UsageError(f"{where}: unknown key '{key}'", hint=f"allowed: {', '.join(PLAN_KEYS)}")
        narrow[str(key)] = items
    modes = tuple(str(m) for m in narrow.pop("modes", ["agg"]))
    prefill_gpus = tuple(str(g) for g in narrow.pop("prefill_gpus", []))
    _check_modes(where, modes, prefill_gpus)
    try:
        axes = narrow_axes(build_model(["llm_fleet"]), narrow, model_id=defn.given.get("model"))
        question = _plan_question(defn.given, axes["gpu"], prefill_gpus)
        return plan_fleet_once(question, axes, modes=modes, prefill_gpus=prefill_gpus)
    except ConcurError as exc:
        if exc.field not in PLAN_KEYS:
            raise
        raise UsageError(f"{where}.{exc.field}: {exc.message}", hint=exc.hint) from None


PLAN_KEYS = (*AXIS_KEYS, "modes", "prefill_gpus")
"""A ``plan:`` entry's keys: the axes it narrows, the serving modes it compares (``agg``, ``disagg``;
default ``agg``) and the GPUs a disaggregated row's prefill pool runs on (``concur plan --modes``,
``--prefill-gpus``; default: the row's own GPU)."""


def _check_modes(where: str, modes: Sequence[str], prefill_gpus: Sequence[str]) -> None:
    """A ``plan:`` entry's modes are agg and/or disagg; ``prefill_gpus`` needs the disaggregated rows."""
    bad = [m for m in modes if m not in ("agg", "disagg")]
    if bad:
        raise UsageError(f"{where}.modes: unknown serving mode '{bad[0]}'", hint="modes: [agg, disagg]")
    if prefill_gpus and "disagg" not in modes:
        raise UsageError(
            f"{where}.prefill_gpus: places the prefill pool of disaggregated rows, and the plan has none",
            hint="add modes: [agg, disagg] (or [disagg])",
        )


def _plan_question(given: Mapping[str, Any], gpus: Sequence[str], prefill_gpus: Sequence[str]) -> dict[str, Any]:
    """The plan's question: the definition's givens less the axes the plan compares (the prefill GPU
    too: the plan's ``prefill_gpus`` axis). The definition's ``prefill_gpu_hour_price`` is the price of
    its own ``prefill_gpu``, so it prices the plan's prefill pools only when that GPU is the one type
    they run on beside another decode GPU; else they keep their list prices (inputs on the sheet)."""
    question = {k: v for k, v in given.items() if k not in AXES and k != "prefill_gpu"}
    own = given.get("prefill_gpu")
    if "prefill_gpu_hour_price" in question and (own is None or cross_gpus(gpus, prefill_gpus) != [own]):
        del question["prefill_gpu_hour_price"]
    return question


def export_definition(
    path: str | Path | WorkbookDefinition, out: str | Path | None = None, search_up_to: int | None = None
) -> Path:
    """Solve a workbook definition (its file, or one :func:`load_definition` read) and write its
    workbook (default: beside it, ``.xlsx``); ``search_up_to`` overrides the definition's. The
    plan and its printed formulas are remembered (:mod:`concur.excel.memo`): the same definition
    with the same inputs is not solved nor printed again."""
    from .layout import Tape
    from .memo import recall, remember
    from .writer import write_workbook  # openpyxl: only when a workbook is written

    defn = path if isinstance(path, WorkbookDefinition) else load_definition(path)
    up_to = search_up_to if search_up_to is not None else defn.search_up_to
    target = Path(out) if out is not None else defn.path.with_suffix(".xlsx")
    remembered = recall(defn, up_to)
    if remembered is not None:  # the plan and its printed formulas: no solve, no sympy
        plan, tape = remembered
        return write_workbook(_compared(plan, defn), target, tape)
    with recording() as reads:
        model, sol = solve_definition(defn)
        plan = plan_for(model, sol, defn.title, defn.sweeps, defn.scenarios, doc=defn.doc, search_up_to=up_to)
    tape = Tape()
    written = write_workbook(_compared(plan, defn), target, tape)
    remember(defn, up_to, reads, plan, tape)
    return written


def _compared(plan: Any, defn: WorkbookDefinition) -> Any:
    """``plan`` with the fleet plan of the definition's ``plan:`` entry, if it has one."""
    fleet = fleet_plan_of(defn)
    return plan if fleet is None else replace(plan, comparison=fleet)


def is_definition(path: Path) -> bool:
    """A workbook definition has a title and a find list (a scenario file has neither title)."""
    data = load_yaml(path)
    return isinstance(data, YMap) and "title" in data and "find" in data
