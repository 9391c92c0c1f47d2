"""The workbook plan: the frozen interface between the solver and the Excel writer.

The engine solves a scenario and describes, in these dataclasses, everything a
live workbook needs: the inputs (with display units and the base-unit scale of
one display unit), the catalog presets that filled some of them, the derived
variables as sympy closed forms over *base-unit* symbols, sweeps and scenarios.
:func:`concur.excel.writer.write_workbook` turns a plan into an ``.xlsx``; it
never imports the solver, and the solver never imports openpyxl.

Units: every number in a plan is in the variable's *display* unit, except the
sympy expressions, which work on base-unit magnitudes (what the solver uses).
``SheetVar.scale`` links the two: ``value_base = value_display * scale``. For
``gpu_memory`` shown in GiB, ``scale = 2**30``; for a count, ``scale = 1``.

Worked example (T1, one derived variable)::

    mem = SheetVar("gpu_memory", "GiB", 2**30, "memory the driver reports")
    util = SheetVar("mem_util", "", 1.0, "fraction of memory vLLM may use")
    pool = SheetVar("kv_pool", "GiB", 2**30, "memory left for the KV cache")
    plan = WorkbookPlan(
        title="KV cache", doc="...",
        inputs=[Input(mem, 79.18), Input(util, 0.9)],
        derived=[Derived(pool, Symbol("gpu_memory") * Symbol("mem_util"),
                         "kv_pool = gpu_memory * mem_util", "llm_memory.yaml:40", 71.262)])

The writer rescales each symbol to base units (``2**30*gpu_memory``) and
divides the result by the derived variable's scale (``2**30``); the factors
cancel, so the cell reads ``=gpu_memory*mem_util`` and shows 71.26 (number format
``#,##0.00``) with GiB in the unit column beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:  # sympy is heavy; plans are built by code that already has it
    import sympy

__all__ = [
    "Derived",
    "Input",
    "PresetChoice",
    "Root",
    "Scenario",
    "Search",
    "SheetVar",
    "Sweep",
    "WorkbookPlan",
]


@dataclass(frozen=True)
class SheetVar:
    """One variable as the sheet shows it.

    ``unit`` is display text only (``"GiB"``, ``"token/s"``); ``scale`` is the
    base-unit magnitude of one display unit (must be finite and > 0);
    ``bounds`` are in display units (``None`` = open); ``choices`` makes the
    input a list (categorical) variable.
    """

    name: str
    unit: str
    scale: float
    doc: str
    integer: bool = False
    bounds: tuple[float | None, float | None] = (None, None)
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.scale, (int, float)) and math.isfinite(self.scale) and self.scale > 0):
            raise UsageError(
                f"variable '{self.name}': scale must be a finite number > 0, got {self.scale!r}",
                variable=self.name,
                hint="scale is the base-unit magnitude of one display unit (1 for plain counts)",
            )


@dataclass(frozen=True)
class Input:
    """An input cell: a value in display units, optionally set by a preset.

    ``preset`` names the :class:`PresetChoice` key that set it (the cell then
    becomes a lookup into the Catalogs sheet); ``source`` cites where a catalog
    number came from.
    """

    var: SheetVar
    value: float
    preset: str | None = None
    source: str = ""


@dataclass(frozen=True)
class PresetChoice:
    """A catalog preset such as ``gpu=h100-sxm-80gb``.

    ``table[var][id]`` is the display value ``var`` takes when ``id`` is chosen (the choice
    text for a choice variable: a model's ``attention`` is ``"mla"``); ``sources[var][id]``
    is its citation. ``selected`` must be one of ``ids``. ``follows``: the preset this one
    stands for until the sheet's user picks an id of its own (``prefill_gpu`` follows ``gpu``
    when the question did not name it: its cell is a formula reading ``gpu``'s), else empty.
    """

    key: str
    catalog: str
    selected: str
    ids: tuple[str, ...]
    table: dict[str, dict[str, float | str]]
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    follows: str = ""

    def __post_init__(self) -> None:
        if self.selected not in self.ids:
            raise UsageError(
                f"preset '{self.key}': selected id '{self.selected}' is not in catalog "
                f"'{self.catalog}' ({', '.join(self.ids)})",
                variable=self.key,
                hint="pick one of the listed ids",
            )


@dataclass(frozen=True)
class Root:
    """A value without a closed form, solved in every row of a candidate table.

    ``variable`` is a torn loop's variable (``concurrency`` inside the fleet's fixed point);
    ``residual`` its equation as ``lhs - rhs`` in base units, 0 at the solution, with
    ``slope`` its own derivative in ``variable`` (a nonzero number), so that
    ``g(x) = x - residual / slope`` is the loop as a fixed-point map. ``body`` names the plan
    rows (in order) the residual reads through ``variable``: recomputed at every iterate.
    Each row starts at ``start`` (display unit), takes ``fixed_steps`` steps ``x <- g(x)``
    and then ``secant_steps`` secant steps; it is solved when ``|x - g(x)| <= tolerance*|x|``
    at the last iterate, else the row reads "no root".
    """

    variable: str
    residual: sympy.Expr
    slope: float
    body: tuple[str, ...]
    start: float
    fixed_steps: int
    secant_steps: int
    tolerance: float


@dataclass(frozen=True)
class Search:
    """A whole-number answer picked live from a table of candidates.

    The sheet evaluates ``test`` (a sympy relation in *base* units over plan variables,
    ``service_level >= service_level_target``) for each candidate n = ``low`` .. ``high``
    (display units) of the searched variable, recomputing ``columns`` (derived variables that
    depend on it, plan names) row by row; the answer is the first n that passes
    (``direction`` "smallest") or the last one before the first failure ("largest").
    ``floor`` and ``ceiling`` are the variable's own bounds: a table that starts above
    ``floor`` cannot tell whether a smaller n passes, so an answer at its first row counts
    as out of range. A candidate whose columns leave their bounds or break one of ``checks``
    (constraints such as ``attention_heads % tp == 0``) is ``skip``ped (``skip=True``: a goal
    seek passes over it) or fails (``skip=False``: an integer loop tear counts it as not enough).
    ``about`` says in one sentence what the table answers. ``roots`` are columns without a
    closed form (a loop torn at a continuous variable) solved in each row (:class:`Root`).
    """

    test: sympy.Basic
    columns: tuple[str, ...]
    low: int
    high: int
    direction: str = "smallest"
    floor: int | None = None
    ceiling: int | None = None
    checks: tuple[sympy.Basic, ...] = ()
    skip: bool = True
    about: str = ""
    roots: tuple[Root, ...] = ()

    def __post_init__(self) -> None:
        if self.direction not in ("smallest", "largest") or self.high < self.low:
            raise UsageError(
                f"search table {self.low}..{self.high} ({self.direction}) is empty or has no direction",
                hint="low <= high; direction smallest or largest",
            )


@dataclass(frozen=True)
class Derived:
    """A computed variable.

    ``expr`` is a sympy expression over Symbols named exactly like plan
    variables, in *base* units; ``value`` is the engine's answer in display
    units (the sheet shows it next to the live formula for comparison).
    ``implicit`` blocks have no closed form: the sheet holds ``value`` and a
    residual cell built from ``residual`` (base units, 0 at the solution).
    ``search`` rows have no closed form either, but are live: the formula picks the
    answer from a candidate table (:class:`Search`). ``solved_in`` names the searched
    variable whose table solves this row as a :class:`Root`: the formula reads the root
    from the picked candidate's row.
    """

    var: SheetVar
    expr: sympy.Expr | None
    equation: str
    where: str
    value: float
    implicit: bool = False
    residual: sympy.Expr | None = None
    search: Search | None = None
    solved_in: str | None = None


@dataclass(frozen=True)
class Sweep:
    """A sweep sheet: ``over`` (an input) takes ``values``; ``outputs`` are charted.

    ``x`` and ``y`` are the axis titles.
    """

    name: str
    over: str
    values: tuple[float, ...]
    outputs: tuple[str, ...]
    x: str
    y: str
    title: str
    log_x: bool = False


@dataclass(frozen=True)
class Scenario:
    """A named what-if: input name -> display value overriding the Inputs sheet."""

    name: str
    overrides: dict[str, float]
    doc: str = ""


@dataclass(frozen=True)
class WorkbookPlan:
    """Everything :func:`write_workbook` needs.

    ``derived`` is topologically ordered: each expression refers only to
    inputs or earlier derived variables. ``givens_text`` maps a given's name to
    the text the user typed (``"8192 token"``), shown on the Notes sheet.
    ``found`` names the variables the question asked for: the summary block at the
    top of the first sheet shows them in large type (the last derived row when empty).
    ``comparison`` is a fleet plan (:class:`concur.analysis.fleet_plan.FleetPlan`) shown on
    a *Plan* sheet of its own (:mod:`concur.excel.plan_sheet`), or None.
    """

    title: str
    doc: str
    inputs: list[Input]
    presets: list[PresetChoice] = field(default_factory=list)
    derived: list[Derived] = field(default_factory=list)
    sweeps: list[Sweep] = field(default_factory=list)
    scenarios: list[Scenario] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    givens_text: dict[str, str] = field(default_factory=dict)
    found: tuple[str, ...] = ()
    comparison: Any = None

    def variables(self) -> dict[str, SheetVar]:
        """Every input and derived variable by name (inputs first, plan order)."""
        out: dict[str, SheetVar] = {}
        for inp in self.inputs:
            out[inp.var.name] = inp.var
        for d in self.derived:
            out[d.var.name] = d.var
        return out
