"""What the page asks, in the command line's words: a JSON question in, the CLI's answer out.

A question is one JSON object, the same words ``concur solve`` takes::

    {"packs": ["llm_fleet"], "find": ["replicas"], "given": {"arrival_rate": 50, "gpu": "h200-sxm-141gb"}}

``given`` values are exactly ``--set`` values: a bare number is in the variable's display unit,
text carries its unit (``"2 s"``) or names a preset. :func:`read_question` checks the shape and
the names (packs only from the shipped set and ``--pack-path``: never a path), and everything
after that is the CLI's own code: :func:`concur.cli.givens.solve_question` solves,
:func:`concur.cli.render.render_table` writes the answer text and the derivation, and a failure
is the CLI's one error line (:mod:`concur.cli.report`) with the field it concerns. So the page,
``concur solve`` and :func:`command_line` always agree: the line printed under the answer, run in
a terminal, prints the answer shown.

Invariants: every function here returns JSON-ready data (a non-finite number is written as ``null``
by :func:`json_text`, the one place answers become JSON) or raises
:class:`concur.errors.ConcurError`; nothing is written outside a temporary folder, which is removed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...analysis.fleet_plan import plan_fleet, rows, why_none
from ...analysis.plot import pareto_points
from ...api import packs_for
from ...errors import ConcurError, UnderdeterminedError, UsageError
from ...lang.library import get_catalog, pack_path, pack_paths
from ...lang.model import build_model
from ...solver.question import flush_caches
from ...sweep.vector import range_values, require_fixed, sweep
from ..commands.plan import csv_text, question_from
from ..commands.plan import table as plan_table
from ..commands.show import pack_document
from ..givens import parse_sets, solve_question
from ..hints import for_cli
from ..ranges import parse_range
from ..render import printable, render_table
from ..report import error_document

__all__ = [
    "FLEET_ANSWERS",
    "FLEET_FIELDS",
    "MAX_NAMES",
    "MAX_POINTS",
    "MAX_TEXT",
    "Question",
    "answer_error",
    "available_packs",
    "command_line",
    "curve",
    "finite",
    "json_text",
    "meta",
    "plan",
    "plan_command_line",
    "read_curve",
    "read_question",
    "solve",
    "solve_csv",
    "workbook",
]

MAX_NAMES = 64  # givens, targets or packs in one question
MAX_TEXT = 200  # characters of one value as typed
MAX_POINTS = 2000  # points of one curve
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,79}$")
_PACK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$")  # a name, never a path

# The fleet page: its fields (in order) and the answers it shows. Every one is an llm_fleet variable
# or preset key; what each means, its unit, bounds and choices come from the pack (meta()).
FLEET_FIELDS = (
    "model",
    "gpu",
    "tp",
    "weight_dtype",
    "kv_dtype",
    "engine",
    "arrival_rate",
    "input_tokens",
    "output_tokens",
    "ttft_slo",
    "itl_slo",
    "utilization",
    "gpu_hour_price",
    "monthly_budget",
    "replicas",
)
FLEET_ANSWERS = ("replicas", "fleet_gpus", "cost_per_month", "cost_per_million_tokens", "ttft", "itl")


@dataclass(frozen=True)
class Question:
    """A checked question: pack names, targets, and (name, value as typed) pairs in order."""

    packs: tuple[str, ...]
    find: tuple[str, ...]
    given: tuple[tuple[str, str], ...]

    def sets(self) -> tuple[str, ...]:
        """The ``--set NAME=VALUE`` words."""
        return tuple(f"{name}={value}" for name, value in self.given)


def available_packs() -> dict[str, str]:
    """Pack name -> where it comes from (``shipped`` or the ``--pack-path`` folder): all a page may name."""
    out = {name: "shipped" for name in pack_paths()}
    for folder in pack_path():
        for path in sorted(folder.glob("*.yaml")):
            out.setdefault(path.stem, str(folder))
    return out


def _names(doc: dict[str, Any], key: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    raw = doc.get(key, [])
    if isinstance(raw, str):
        raw = [x.strip() for x in raw.split(",") if x.strip()]
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise UsageError(f"'{key}' must be a list of names")
    if len(raw) > MAX_NAMES:
        raise UsageError(f"'{key}' names {len(raw)} entries; at most {MAX_NAMES}")
    for name in raw:
        if not pattern.match(name):
            raise UsageError(f"'{printable(name[:80])}' is not a name", hint=f"'{key}' takes names such as replicas")
    return tuple(raw)


def _value_text(name: str, value: Any) -> str | None:
    """A given as ``--set`` would read it; None for an empty field (not given)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UsageError(f"{name}: a value is a number or text such as '2 s'", variable=name)
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{name}: {value} is not a finite number", variable=name)
    text = value.strip() if isinstance(value, str) else repr(value)
    if len(text) > MAX_TEXT:
        raise UsageError(f"{name}: the value is {len(text)} characters long; at most {MAX_TEXT}", variable=name)
    return text or None


def read_question(doc: Any, *, need_find: bool = True) -> Question:
    """Check a question document (see the module docstring); UsageError (exit 2) names what is wrong."""
    if not isinstance(doc, dict):
        raise UsageError("a question is a JSON object with packs, find and given")
    unknown = sorted(set(doc) - {"packs", "find", "given"})
    if unknown:
        raise UsageError(f"unknown key '{printable(unknown[0][:80])}' in the question", hint="use packs, find, given")
    packs = _names(doc, "packs", _PACK)
    known = available_packs()
    for name in packs:
        if name not in known:
            raise UsageError(
                f"unknown pack '{name}'", hint="the shipped packs and those in a --pack-path folder ('concur list')"
            )
    find = _names(doc, "find", _NAME)
    if need_find and not find:
        raise UsageError("nothing to solve for", hint="pick at least one variable to find")
    given_doc = doc.get("given", {})
    if not isinstance(given_doc, dict):
        raise UsageError("'given' must map NAME to a value")
    if len(given_doc) > MAX_NAMES:
        raise UsageError(f"'given' names {len(given_doc)} values; at most {MAX_NAMES}")
    given: list[tuple[str, str]] = []
    for name, value in given_doc.items():
        if not _NAME.match(name):
            raise UsageError(f"'{printable(name[:80])}' is not a name")
        text = _value_text(name, value)
        if text is not None and name not in find:
            given.append((name, text))
    return Question(packs, find, tuple(given))


def _pack_path_words() -> list[str]:
    return [word for folder in pack_path() for word in ("--pack-path", str(folder))]


def command_line(q: Question, verb: str = "solve") -> str:
    """The ``concur solve`` (or ``export``) command that asks ``q``: run it, get the page's answer."""
    words = ["concur", verb, *_pack_path_words(), *q.packs, "--find", ",".join(q.find)]
    for item in q.sets():
        words += ["--set", item]
    if verb == "export":
        words += ["-o", "answer.xlsx"]
    return shlex.join(words)


def plan_command_line(q: Question) -> str:
    """The ``concur plan`` command for ``q``'s givens."""
    words = ["concur", "plan", *_pack_path_words()]
    for item in q.sets():
        words += ["--set", item]
    return shlex.join(words)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON has no inf or NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(doc: Any, indent: int | None = None) -> str:
    """``doc`` as JSON; a non-finite number (JSON has none) becomes ``null``, and only then is the
    document walked."""
    try:
        return json.dumps(doc, allow_nan=False, indent=indent)
    except ValueError:
        return json.dumps(finite(doc), allow_nan=False, indent=indent)


def _binds(doc: dict[str, Any]) -> str | None:
    """What binds, in the solver's words: the targets its trace names ("...; what binds: itl_slo"),
    else how it sized the replicas (the trace note of ``replicas``), else None."""
    sized = None
    for step in doc["trace"]:
        note = step.get("note", "")
        if "what binds: " in note:
            return str(note.split("what binds: ", 1)[1])
        if step["variable"] == "replicas" and note:
            sized = str(note)
    return sized


def _solution(q: Question) -> Any:
    return solve_question(q.packs, q.find, q.sets(), None)


def solve(q: Question) -> dict[str, Any]:
    """The answer to ``q``: ``concur solve --json``'s object plus ``text`` (what ``concur solve``
    prints), ``why`` (what ``--explain`` prints), ``binds`` and ``command``."""
    sol = _solution(q)
    doc: dict[str, Any] = sol.to_json()
    doc.update(
        text=render_table(sol, False),
        why=render_table(sol, True),
        binds=_binds(doc),
        command=command_line(q),
        export_command=command_line(q, "export"),
    )
    return doc


def solve_csv(q: Question) -> str:
    """The answer's results and givens as CSV: ``kind,name,value,unit``."""
    doc = finite(_solution(q).to_json())
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["kind", "name", "value", "unit"])
    for kind in ("results", "given"):
        for name, entry in doc[kind].items():
            out.writerow([kind.rstrip("s"), name, entry["value"], entry["unit"]])
    return buf.getvalue()


def workbook(q: Question) -> bytes:
    """The live workbook of ``q``, as ``concur export`` writes it (needs the excel extra)."""
    from ...excel.from_solution import plan_from_solution
    from ...excel.writer import write_workbook
    from ...extras import need

    need("openpyxl", "the workbook download")
    sol = _solution(q)
    plan_ = plan_from_solution(sol, " + ".join(sol.model.pack_names))
    with tempfile.TemporaryDirectory(prefix="concur-serve-") as folder:
        path = Path(folder) / "answer.xlsx"
        write_workbook(plan_, path)
        return path.read_bytes()


def read_curve(doc: Any) -> tuple[Question, str, bool]:
    """A curve question: a question document plus ``over`` (``"VAR=START..STOP:N"``, the words of
    ``concur sweep --over``) and ``log``; at most :data:`MAX_POINTS` points."""
    if not isinstance(doc, dict):
        raise UsageError("a curve is a JSON object with packs, find, given, over and log")
    over, log = doc.get("over"), doc.get("log", False)
    if not isinstance(over, str) or len(over) > MAX_TEXT or not isinstance(log, bool):
        raise UsageError("'over' is VAR=START..STOP:N and 'log' true or false", hint="e.g. concurrency=1..256:64")
    q = read_question({k: v for k, v in doc.items() if k not in ("over", "log")})
    name, values, is_range = parse_range(over)
    if not is_range:
        raise UsageError(f"'over' must be a range VAR=START..STOP:N, got '{printable(over)}'", variable=name)
    if not 2 <= int(values[2]) <= MAX_POINTS:
        raise UsageError(f"a curve has 2 to {MAX_POINTS} points, not {int(values[2])}", variable=name)
    return Question(q.packs, q.find, tuple((k, v) for k, v in q.given if k != name)), over, log


def curve(q: Question, over: str, log: bool) -> dict[str, Any]:
    """``concur sweep PACKS --over VAR=START..STOP:N [--log] --find Y,... --set ...``: the found
    variables against the swept one, each with its unit, the sweep's notes and its command line."""
    name, (start, stop, points), _ = parse_range(over)
    model = build_model(list(q.packs) if q.packs else packs_for(q.find))
    given = parse_sets(q.sets())
    require_fixed(model, {name: [start, stop], **given}, q.find)
    for target in q.find:
        if model.variable(target).choices:
            raise UsageError(f"'{target}' is a choice, not a number to draw", variable=target)
    x = range_values(float(start), float(stop), int(points), log)
    result = sweep(model, {name: x}, given, list(q.find))
    flush_caches(model)
    words = ["concur", "sweep", *_pack_path_words(), *q.packs, "--over", over, *(["--log"] if log else [])]
    words += ["--find", ",".join(q.find)]
    for item in q.sets():
        words += ["--set", item]
    return {
        "x": {"name": name, "unit": model.variable(name).display.text, "values": [float(v) for v in x]},
        "series": [
            {"name": t, "unit": model.variable(t).display.text, "values": [float(v) for v in result[t].ravel()]}
            for t in q.find
        ],
        "notes": list(result.messages),
        "command": shlex.join(words),
    }


def _plan_result(q: Question) -> Any:
    question, notes = question_from(q.sets(), None)
    result = plan_fleet(question)
    result.notes[:0] = notes
    return result


def plan(q: Question) -> dict[str, Any]:
    """``concur plan``'s candidates (``--json``'s rows: feasible cheapest first, then the rejected
    with their reason), the Pareto chart's points (``--plot``'s: tokens/s per user and per GPU of
    each feasible row, ``row`` indexing ``candidates``), its notes, its text table, its command line
    and, when nothing is feasible, the CLI's error line."""
    result = _plan_result(q)
    feasible, per_user, per_gpu, front = pareto_points(result)
    index = {id(c): i for i, c in enumerate(result.candidates)}
    out: dict[str, Any] = {
        "candidates": list(rows(result)),
        "pareto": [
            {"row": index[id(c)], "per_user": float(u), "per_gpu": float(g), "front": bool(f)}
            for c, u, g, f in zip(feasible, per_user, per_gpu, front)
        ],
        "notes": list(result.notes),
        "text": "\n".join(plan_table(result, None, True)),
        "command": plan_command_line(q),
    }
    if not result.feasible:
        out["error"] = {"line": printable(f"error: {why_none(result)}"), "field": None}
    return out


def plan_csv(q: Question) -> str:
    """``concur plan --csv``: one row per candidate."""
    return csv_text(_plan_result(q))


def answer_error(exc: ConcurError, q: Question | None) -> dict[str, Any]:
    """``{"error": {...}}``: the CLI's JSON error, its one line as ``concur`` prints it, and the field
    it concerns: the error's data (its variable, else the first of its missing values the page
    shows), else the first field of the question its message names."""
    exc = for_cli(exc)
    doc = error_document(exc)
    body = doc["error"]
    body["line"] = printable(f"error: {exc}")
    fields = [name for name, _ in q.given] + list(q.find) if q is not None else []
    named = [exc.variable, *(exc.missing if isinstance(exc, UnderdeterminedError) else ())]
    field = next((name for name in named if name in fields), None)
    if field is None:
        text = str(body.get("message", ""))
        hits = [(m.start(), name) for name in fields for m in [re.search(rf"\b{re.escape(name)}\b", text)] if m]
        field = min(hits)[1] if hits else None
    body["field"] = field
    return doc


def meta(packs: tuple[str, ...]) -> dict[str, Any]:
    """What a page needs to draw the fields of ``packs``: ``concur show --json``'s document of their
    model, each preset's catalog ids (its choices), the embedded scenario, and every pack on offer."""
    known = available_packs()
    if len(packs) > MAX_NAMES:
        raise UsageError(f"{len(packs)} packs asked for; at most {MAX_NAMES}")
    for name in packs:
        if name not in known:
            raise UsageError(f"unknown pack '{printable(name[:80])}'", hint="'concur list' shows the packs")
    model = build_model(list(packs))
    doc = pack_document(model)
    doc["catalogs"] = {key: list(get_catalog(chain[0].catalog).entries) for key, chain in model.presets.items()}
    doc["scenario"] = next((dict(p.scenario) for p in model.packs if p.scenario), {})
    first = next((ex for ex in model.packs[0].examples if ex.error is None), None)
    doc["example"] = None if first is None else {"given": dict(first.given), "find": list(first.find)}
    doc["packs"] = known
    doc["fleet"] = {"fields": list(FLEET_FIELDS), "answers": list(FLEET_ANSWERS)}
    return doc
