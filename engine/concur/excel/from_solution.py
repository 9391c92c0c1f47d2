"""From a solved scenario to a :class:`~concur.excel.plan.WorkbookPlan`.

How is this designed, and why?
------------------------------
The solver already knows everything a live workbook needs: its trace lists
every value it used, in dependency order, with how each was obtained
(``given``, ``preset``, ``default``, ``forward``, ``inverted``, ``numeric``,
``loop``, ``tear``, ``integer tear``, ``search``). :func:`plan_from_solution` walks that trace once:

* **Inputs** are the ``given``/``preset``/``default`` steps, shown in the
  variable's display unit (``SheetVar.scale`` = base magnitude of one display
  unit), with its doc, bounds, integer flag and choices. A value a preset set
  (``gpu=h100-sxm-80gb``) becomes a lookup into a :class:`PresetChoice` table
  built from the whole catalog (:func:`concur.lang.library.get_catalog`), so the
  dropdown drives every number it filled.
* **Derived** rows are the computed steps in trace order, each with a sympy
  closed form over *base-unit* symbols: a forward equation gives its other
  side; an inverted one the closed form the solver itself found (the cached
  inverse of the same specialised equation, the root that reproduces the
  solver's value); ``numeric`` and torn ``loop`` steps have no closed form and
  become *implicit* rows (the solved value plus a residual that is 0 at the
  solution).
* **Live branches.** ``if_`` in a forward equation prints as ``IF(...)`` whenever
  every name of both branches can be on the sheet. The solver folds the branch its
  givens do not select, so an export for a GQA model never computed what the MLA
  or sliding-window branch reads: :meth:`_Builder.branch_closure` evaluates each
  such name forward (``sliding_held``, ``kv_heads_per_gpu``) as an extra row.
  Every catalog field the sheet shows and nobody typed is a lookup on the chosen
  id -- including choice text (a model's ``attention``: ``gqa``/``mla``) and the
  pack default for entries that lack the field (``kv_lora_rank`` 0 for Llama) --
  so picking DeepSeek-V3 or gpt-oss-120b in the dropdown gives what ``concur
  solve`` gives for it.
* **Live searched integers.** A goal seek's target (``service_level=0.8``) becomes
  an input cell ``service_level_target``; an integer answer of a goal seek or of a
  loop torn at an integer (``replicas``) becomes a candidate table
  (:mod:`concur.excel.live_search`), kept only when it reproduces the solver's
  answer in Python; otherwise, and for continuous searches, the row stays
  implicit with residual ``goal - target``.

Worked example (T1, KV cache): ``concur export llm_memory --find users
--set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=4 ...`` gives the
inputs (params 70.55 Gparameter, gpu_memory 79.18 GiB, attention gqa,
kv_lora_rank 0, sliding_window 0 ... looked up from the model and gpu presets;
tp 4, context 8192 token/user typed; block_size 16 from defaults) and the derived
rows ending in ``users = floor(...)``; LibreOffice recalculates ``users`` to 55,
and to 162 after typing 8 into tp.

A given keeps the unit it was typed in (:func:`typed_input`): ``arrival_rate: 300
request/hour`` shows 300 with unit request/hour, not 0.0833 request/s.

Consequences: the workbook answers *the same question* for other inputs; it
does not re-plan. An ``if_`` inside an equation the solver inverted or solved
numerically keeps the branch it took; a branch that needs a value no forward
equation gives is folded to the branch the solver took. Re-export when an edit
needs another equation direction.

Non-goals: constraints (``attention_heads % tp == 0``) are not turned into
cells, except as the check a searched ``tp`` must pass in its candidate table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import sympy

from ..errors import ConcurError, Location, UsageError
from ..lang.expr import Call, If, Node, Var, compile_node, map_tree, names_in, to_text, walk
from ..lang.fallback import LENT, fallback_of
from ..lang.library import get_catalog
from ..lang.model import Model
from ..lang.pack import Catalog, Equation, Preset, Variable
from ..lang.units import UnitInfo, parse_quantity
from ..lang.values import count_factor
from ..solver.goal_seek import goal_sense
from ..solver.plan import Method, Step
from ..solver.problem import fold_known as solver_fold
from ..solver.seek import needs_search
from ..solver.solution import Solution
from ..solver.symbolic import to_sympy
from .live_search import Candidate, goal_test, make_live
from .plan import Derived, Input, PresetChoice, Scenario, SheetVar, Sweep, WorkbookPlan

__all__ = ["display_value", "plan_from_solution", "sheet_var", "typed_input"]

_WORDS = {"at_least": "at least", "at_most": "at most"}

_INPUT_METHODS = (Method.GIVEN, Method.PRESET, Method.DEFAULT)
_COMPUTED_METHODS = (Method.FORWARD, Method.INVERTED, Method.NUMERIC, Method.LOOP, Method.TEAR, Method.INTEGER_TEAR)


def sheet_var(var: Variable) -> SheetVar:
    """The sheet's view of ``var``: display unit, scale, doc, display-unit bounds."""
    scale = float(var.display.factor)
    lo, hi = var.bounds
    bounds = (None if lo is None else lo / scale, None if hi is None else hi / scale)
    return SheetVar(
        var.name, var.display.text, scale, var.doc, integer=var.integer, bounds=bounds, choices=tuple(var.choices)
    )


def display_value(var: Variable, base: float) -> Any:
    """A base-unit value in ``var``'s display unit (the choice text for a choice variable)."""
    if var.choices:
        return var.choices[int(base)]
    value = base / var.display.factor
    if var.integer and abs(value - round(value)) <= 1e-9 * max(1.0, abs(value)):
        return float(round(value))
    return value


def _equation(model: Model, step: Step) -> Equation:
    if step.eq is None or not 0 <= step.eq < len(model.equations):
        raise UsageError(
            f"the trace step for '{step.variable}' names no equation of the model",
            variable=step.variable,
            hint="export the solution from the model that produced it",
        )
    return model.equations[step.eq]


def _fold(node: Node, known: dict[str, Any], available: set[str]) -> Node:
    """Fold each ``if_`` whose branches need a name without a value (keep the rest live).

    ``known`` holds every solved value, so a condition on a computed value folds to the
    branch the solver took.
    """

    def fix(n: Node) -> Node | None:
        if not isinstance(n, If):
            return None
        if names_in(n) <= available:
            return None
        if names_in(n.cond) <= known.keys():
            chosen = n.then if compile_node(n.cond)(known) else n.other
            return _fold(chosen, known, available)
        return None

    return map_tree(node, fix)


def _choice_text(expr: sympy.Basic, choices: dict[str, tuple[str, ...]]) -> sympy.Basic:
    """``Eq(attention, 1)`` -> ``Eq(attention, "mla")``: the cell holds the choice text."""
    from sympy.core.symbol import Str

    def is_choice_cmp(e: Any) -> bool:
        if not isinstance(e, (sympy.Eq, sympy.Ne)):
            return False
        lhs, rhs = e.args
        if isinstance(rhs, sympy.Symbol):
            lhs, rhs = rhs, lhs
        return isinstance(lhs, sympy.Symbol) and lhs.name in choices and rhs.is_Integer

    def rewrite(e: Any) -> Any:
        lhs, rhs = e.args
        if isinstance(rhs, sympy.Symbol):
            lhs, rhs = rhs, lhs
        options = choices[lhs.name]
        k = int(rhs)
        text = Str(options[k]) if 0 <= k < len(options) else Str("")
        return type(e)(lhs, text, evaluate=False)

    return expr.replace(is_choice_cmp, rewrite)


class _Builder:
    """Walks one solution's trace into plan inputs and derived rows."""

    def __init__(self, sol: Solution) -> None:
        self.sol = sol
        self.model = sol.model
        self.symbols: dict[str, sympy.Symbol] = {}
        self.inputs: dict[str, Input] = {}
        self.derived: list[Derived] = []
        self.have: set[str] = set()  # names already on the sheet (inputs or earlier derived)
        self.computed = {s.variable for s in sol.trace if s.method in _COMPUTED_METHODS or s.method is Method.SEARCH}
        self.known = {k: v for k, v in sol.values.items() if k not in self.computed}
        self.values: dict[str, Any] = dict(sol.values)  # base units; grows with the branch extras
        self.available = set(sol.values)
        self.extra: dict[str, int] = {}  # variable -> equation: computed only for an if_ branch not taken
        self.preset_of: dict[str, tuple[str, str]] = {}  # variable -> (preset key, id)
        self.typed: set[str] = set()  # inputs already in the unit they were typed in (goal targets)
        self.targets: dict[str, str] = {}  # goal -> the input holding its target
        self.candidates: list[Candidate] = []

    def sym(self, name: str) -> sympy.Symbol:
        if name not in self.symbols:
            self.symbols[name] = sympy.Symbol(name)
        return self.symbols[name]

    def add_input(self, name: str, method: str, note: str = "") -> None:
        if name in self.inputs:
            return
        var = self.model.variables[name]
        value = display_value(var, self.sol.values[name])
        preset = None
        if method == "preset" and note.startswith("preset ") and "=" in note:
            key, ident = note[len("preset ") :].split("=", 1)
            self.preset_of[name] = (key, ident)
            preset = key
        source = {"default": "pack default", "given": "given"}.get(method, note or method)
        self.inputs[name] = Input(sheet_var(var), value, preset=preset, source=source)
        self.have.add(name)

    def expr_of(self, node: Node, owner: str) -> sympy.Expr:
        """sympy form of ``node``; any name not yet on the sheet (nor computed later) becomes an input."""
        for name in sorted(names_in(node)):
            if name not in self.have and name not in self.computed and name not in self.extra:
                if name not in self.sol.values:
                    raise UsageError(
                        f"'{owner}' needs '{name}', which the solution has no value for",
                        variable=owner,
                        hint="give it",
                        kind="give_it",
                    )
                src = self.sol.givens.sources.get(name, "")
                method = "preset" if src.startswith("preset") else ("given" if src == "given" else "default")
                self.add_input(name, method, src)
        return _choice_text(to_sympy(node, {n: self.sym(n) for n in names_in(node)}), self._choices())

    # ------------------------------------------------------------ branches not taken

    def branch_closure(self) -> None:
        """Compute what the branches of forward ``if_`` need but the solver never did.

        The solver folds ``if_(attention == "mla", ...)`` to the branch its givens select, so a
        GQA export never computes what the MLA branch reads (and an MLA export never computes
        ``kv_heads_per_gpu``). Each such name that a forward equation ``name = ...`` gives from
        available values is evaluated here and becomes a derived row, so the ``IF`` stays live.
        """
        queue = [self.model.equations[s.eq] for s in self.sol.trace if s.method is Method.FORWARD and s.eq is not None]
        while queue:
            eq = queue.pop(0)
            for node in (*walk(eq.lhs), *walk(eq.rhs)):
                if not isinstance(node, If):
                    continue
                for name in sorted(names_in(node) - self.available):
                    added = self._supply(name)
                    queue.extend(self.model.equations[i] for _, i in added)

    def _supply(self, name: str) -> list[tuple[str, int]]:
        """Evaluate ``name`` (and what it needs) forward from available values; [] when impossible."""
        steps = self._supply_plan(name, frozenset(), set(self.available))
        if not steps:
            return []
        env = dict(self.values)
        try:
            for var, i in steps:
                env[var] = float(compile_node(self.model.equations[i].rhs)(env))
                if not math.isfinite(env[var]):
                    return []
        except (ArithmeticError, ValueError, KeyError, TypeError):
            return []
        for var, i in steps:
            self.values[var] = env[var]
            self.extra[var] = i
            self.available.add(var)
        return steps

    def _supply_plan(self, name: str, visiting: frozenset[str], avail: set[str]) -> list[tuple[str, int]] | None:
        if name in avail:
            return []
        if name in visiting:
            return None
        for i, eq in enumerate(self.model.equations):
            if not (isinstance(eq.lhs, Var) and eq.lhs.name == name) or name in names_in(eq.rhs):
                continue
            steps: list[tuple[str, int]] = []
            trial = set(avail)
            for n in sorted(names_in(eq.rhs)):
                sub = self._supply_plan(n, visiting | {name}, trial)
                if sub is None:
                    break
                steps += sub
                trial |= {v for v, _ in sub}
            else:
                return steps + [(name, i)]
        return None

    # ------------------------------------------------------------ computed steps

    def add_step(self, step: Step) -> None:
        var = self.model.variables[step.variable]
        sv = sheet_var(var)
        value = display_value(var, step.value)
        if step.method is Method.SEARCH:
            self._add_search(step, sv, value)
            return
        eq = _equation(self.model, step)
        where = str(eq.where)
        if step.method is Method.FORWARD:
            lhs, rhs = _fold(eq.lhs, self.values, self.available), _fold(eq.rhs, self.values, self.available)
            side = rhs if isinstance(lhs, Var) and lhs.name == step.variable else lhs
            text = eq.text + ("  (for the if_ branch not taken at export)" if step.variable in self.extra else "")
            self.derived.append(Derived(sv, self.expr_of(side, step.variable), text, where, value))
        elif step.method in (Method.INVERTED, Method.LOOP) and self._closed_form(step) is not None:
            expr = self.expr_of(self._closed_form(step), step.variable)  # type: ignore[arg-type]
            label = "  (inverted)" if step.method is Method.INVERTED else "  (loop, closed form)"
            self.derived.append(Derived(sv, expr, eq.text + label, where, value))
        else:  # numeric, torn loops: implicit, residual lhs - rhs
            lhs, rhs = solver_fold(eq.lhs, self.known), solver_fold(eq.rhs, self.known)
            others = (names_in(lhs) | names_in(rhs)) - {step.variable}
            residual = None
            if all(n in self.sol.values for n in others):
                residual = self.expr_of(lhs, step.variable) - self.expr_of(rhs, step.variable)
            self.derived.append(
                Derived(sv, None, eq.text + f"  ({step.method})", where, value, implicit=True, residual=residual)
            )
            if (
                step.method is Method.INTEGER_TEAR
                and isinstance(lhs, Var)
                and lhs.name == step.variable
                and isinstance(rhs, Call)
                and rhs.fn in ("ceil", "floor")
                and residual is not None
            ):
                self._integer_tear(step, var, rhs)
        self.have.add(step.variable)

    def _integer_tear(self, step: Step, var: Variable, rhs: Call) -> None:
        """An integer loop tear as a candidate for a live table: ceil(...) <= n (smallest n)."""
        need = self.expr_of(rhs, step.variable)
        x = self.sym(step.variable)
        ceil = rhs.fn == "ceil"
        lo, hi = var.bounds
        self.candidates.append(
            Candidate(
                step.variable,
                sympy.Le(need, x) if ceil else sympy.Ge(need, x),
                "smallest" if ceil else "largest",
                skip=False,
                floor=math.ceil(lo) if lo is not None else 0,
                ceiling=math.floor(hi) if hi is not None else None,
                about=f"the {'smallest' if ceil else 'largest'} {step.variable} with {to_text(rhs)} "
                f"{'<=' if ceil else '>='} {step.variable} (the loop it closes is solved in each row)",
            )
        )

    def _add_search(self, step: Step, sv: SheetVar, value: Any) -> None:
        """A goal seek: each target becomes an input; an integer answer a candidate for a live table.

        Several targets (ITL and TTFT limits) and the searched count's own rounding equation
        (``replicas = ceil(...)``, a requirement) are all part of one test: a candidate passes when
        it meets every one of them, as the solver's search requires.
        """
        x = step.variable
        seek = self._seek_of(x)
        residual = None
        if seek is not None:
            targets = [(goal, self._target_input(goal, x)) for goal in seek.goals]
            if len(targets) == 1 and seek.requirement is None:
                residual = self.sym(targets[0][0]) - self.sym(targets[0][1])
            senses = [goal_sense(self.model, goal) for goal, _ in targets]
            tests = [
                goal_test(self.sym(goal), self.sym(target), sense) for (goal, target), sense in zip(targets, senses)
            ]
            words = [
                f"{goal} {_WORDS.get(sense, 'equal to')} {target}" for (goal, target), sense in zip(targets, senses)
            ]
            if seek.requirement is not None:
                rhs = self.model.equations[seek.requirement].rhs
                need = self.expr_of(rhs, x)
                ceil = any(isinstance(n, Call) and n.fn == "ceil" for n in walk(rhs))
                tests.append(sympy.Le(need, self.sym(x)) if ceil else sympy.Ge(need, self.sym(x)))
                words.append(f"{to_text(rhs)} {'<=' if ceil else '>='} {x}")
            direction = "largest" if step.note.startswith("largest") else "smallest"
            var = self.model.variables[x]
            checks = tuple(
                self.expr_of(c.expr, x)
                for c in self.model.constraints
                if x in names_in(c.expr)
                and names_in(c.expr) <= self.available
                and not any(self.model.variables[n].choices for n in names_in(c.expr))
            )
            lo, hi = var.bounds
            self.candidates.append(
                Candidate(
                    x,
                    tests[0] if len(tests) == 1 else sympy.And(*tests),
                    direction,
                    skip=True,
                    floor=math.ceil(lo) if lo is not None else (1 if hi is None or hi >= 1 else 0),
                    ceiling=math.floor(hi) if hi is not None else None,
                    about=f"the {direction} {x} giving {' and '.join(words)}",
                    checks=checks,
                    extra=tuple((target, self.sol.givens.values[goal]) for goal, target in targets),
                )
            )
        self.derived.append(
            Derived(sv, None, f"search: {step.note}", "search", value, implicit=True, residual=residual)
        )
        self.have.add(x)

    def _seek_of(self, x: str) -> Any:
        """The goal seek the solver ran for ``x`` (its given targets, and its rounding requirement), or None."""
        givens = self.sol.givens
        known = {k: v for k, v in givens.values.items() if k not in self.sol.find}
        try:
            seek = needs_search(self.model, self.sol.find, known, givens)
        except ConcurError:
            seek = None
        if (
            seek is None
            or seek.variable != x
            or not seek.goals
            or not all(goal in givens.values for goal in seek.goals)
        ):
            return None
        return seek

    def _target_input(self, goal: str, x: str) -> str:
        """An input cell ``<goal>_target`` holding the given target, in the unit it was typed in."""
        if goal in self.targets:
            return self.targets[goal]
        name = f"{goal}_target"
        while name in self.model.variables:
            name += "_"
        gvar = self.model.variables[goal]
        base = self.sol.givens.values[goal]
        shown = typed_input(
            Input(sheet_var(gvar), display_value(gvar, base), source="given"),
            gvar,
            base,
            self.sol.givens.texts.get(goal),
        )
        doc = f"the target for {goal}: {x} is searched to meet it"
        self.inputs[name] = Input(replace(shown.var, name=name, doc=doc), shown.value, source="given (target)")
        self.have.add(name)
        self.typed.add(name)
        self.values[name] = base
        self.targets[goal] = name
        return name

    def _closed_form(self, step: Step) -> Node | None:
        """The closed form the solver's plan used for ``step`` (the root or loop branch it chose)."""
        plan = self.sol.plan
        if plan is None or step.eq is None or step.choice is None:
            return None
        block = plan.step_for(step.eq, step.method)
        if block is None:
            return None
        if step.method is Method.INVERTED:
            return block.forms[step.choice] if step.choice < len(block.forms) else None
        if step.choice < len(block.branches) and step.variable in block.variables:
            return block.branches[step.choice][block.variables.index(step.variable)]
        return None

    def _choices(self) -> dict[str, tuple[str, ...]]:
        return {n: v.choices for n, v in self.model.variables.items() if v.choices}

    # ------------------------------------------------------------ catalogs

    def presets(self) -> list[PresetChoice]:
        """One table per preset the givens chose, over the whole catalog.

        A column for every catalog field the sheet shows as an input that was not typed: the
        values the preset set (``layers``), but also those the selected entry lacks and the pack
        defaults (``kv_lora_rank`` 0 for a GQA model, ``sliding_window`` 0 for a dense one), and
        choice text (``attention``), so picking another id changes them all as the solver would.
        """
        out: list[PresetChoice] = []
        claimed: set[str] = set()
        for key, selected in self._chosen_presets().items():
            chain = self.model.presets[key]
            catalog = get_catalog(chain[0].catalog)  # the dropdown lists the first catalog's entries
            table: dict[str, dict[str, float | str]] = {}
            sources: dict[str, dict[str, str]] = {}
            for preset in chain:  # gpu= fills the GPU's specs and, from a second catalog, its price
                extra = get_catalog(preset.catalog)
                for fname, target in self._preset_fields(preset, extra).items():
                    if not self._shows_preset_column(key, target, claimed):
                        continue
                    column, cites = self._preset_column(catalog, extra, fname, target)
                    if selected in column:
                        table[target], sources[target] = column, cites
                        claimed.add(target)
            if not table:
                continue
            follows = fallback_of(self.model, key) if key not in self.sol.givens.presets else ""
            out.append(PresetChoice(key, chain[0].catalog, selected, tuple(catalog.entries), table, sources, follows))
            self._cite_preset(key, selected, sources)
        return out

    def _chosen_presets(self) -> dict[str, str]:
        """Preset key -> the catalog id the givens chose (``gpu`` -> ``H100``), first mention wins."""
        chosen: dict[str, str] = {}
        for src in self.sol.givens.sources.values():
            if src.startswith("preset ") and "=" in src:
                key, ident = src[len("preset ") :].split("=", 1)
                chosen.setdefault(key, ident)
        return chosen

    def _preset_fields(self, preset: Preset, extra: Catalog) -> dict[str, str]:
        """Catalog field -> the variable it sets: the preset's mapping (every field when it has
        none); for a price list, the column of the provider the question chose."""
        if extra.pick is not None:  # the price list: the column of the provider the question chose
            picked = self.sol.givens.picks.get(extra.name, extra.pick.default)
            return {picked: preset.fields.get(extra.pick.sets, extra.pick.sets)}
        return {
            f: preset.fields.get(f, f) if preset.fields else f
            for f in extra.fields
            if not preset.fields or f in preset.fields
        }

    def _shows_preset_column(self, key: str, target: str, claimed: set[str]) -> bool:
        """Whether preset ``key`` fills input ``target`` in the sheet: an input no earlier
        preset claimed, this preset's own, and neither typed, given nor lent from a typed value
        (a fallback preset's ``as gpu_hour_price``: the solver used that value, not the catalog's)."""
        own = self.preset_of.get(target, (key, ""))[0] == key
        source = self.sol.givens.sources.get(target, "")
        return (
            target in self.inputs
            and target not in claimed
            and own
            and target not in self.typed
            and source != "given"
            and not source.startswith(LENT)
        )

    def _preset_column(
        self, catalog: Catalog, extra: Catalog, fname: str, target: str
    ) -> tuple[dict[str, float | str], dict[str, str]]:
        """Catalog id -> the value ``target`` takes (display units, or a choice's text) and its
        source, for every entry of the dropdown's ``catalog``, read from field ``fname`` of ``extra``."""
        var = self.model.variables[target]
        column: dict[str, float | str] = {}
        cites: dict[str, str] = {}
        for ident in catalog.entries:
            entry = extra.entries.get(ident)
            if entry is not None and fname in entry.values:
                fval, source, floc = entry.values[fname]
                value = _catalog_cell(var, fval, extra.fields[fname].unit, floc)
                if value is None:
                    continue
                column[ident] = value
                cites[ident] = str(source)
            elif var.default is not None:
                # An entry without the field takes the variable's default, as the solver does;
                # only a field with no default stays empty ("not listed").
                column[ident] = display_value(var, var.default)
                cites[ident] = f"not in the catalog: {target}'s default"
        return column, cites

    def _cite_preset(self, key: str, selected: str, sources: dict[str, dict[str, str]]) -> None:
        """Mark each input the preset fills with the preset and the selected entry's source."""
        for name in sources:
            cite = sources[name].get(selected, "")
            inp = self.inputs[name]
            self.inputs[name] = Input(
                inp.var,
                inp.value,
                preset=key,
                source=f"{key}={selected}: {cite}" if cite else f"preset {key}={selected}",
            )


def _catalog_cell(var: Variable, fval: Any, unit: UnitInfo, floc: Location) -> float | str | None:
    """A catalog value as the sheet shows it for ``var``: a choice's text, or a number in the
    display unit; None for a value the variable cannot take (the cell stays empty)."""
    if var.choices:
        return fval if isinstance(fval, str) and fval in var.choices else None
    if isinstance(fval, bool) or not isinstance(fval, (int, float)):
        return None
    base = float(fval) * unit.factor * count_factor(unit, var, floc)
    return float(base / var.display.factor)


def _stable_order(rows: list[Derived], declared: list[str]) -> list[Derived]:
    """Topological order of ``rows`` with ties broken by declaration order.

    The solver's block order can vary between processes (set iteration), but
    a committed workbook must be byte-for-byte reproducible in content, so the
    plan fixes one order: a row comes after every row its expression uses.
    """
    import heapq

    rank = {name: i for i, name in enumerate(declared)}
    by_name = {d.var.name: d for d in rows}
    deps = {d.var.name: (_row_reads(d, by_name) & by_name.keys()) - {d.var.name} for d in rows}
    users: dict[str, list[str]] = {n: [] for n in by_name}
    for n, ds in deps.items():
        for m in ds:
            users[m].append(n)
    waiting = {n: len(ds) for n, ds in deps.items()}
    ready = [(rank.get(n, len(rank)), n) for n, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    out: list[Derived] = []
    while ready:
        _, n = heapq.heappop(ready)
        out.append(by_name[n])
        for u in users[n]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (rank.get(u, len(rank)), u))
    return out


def _row_reads(d: Derived, rows: dict[str, Derived]) -> set[str]:
    """What a row's formula reads: its expression, or for a search what its candidate table reads."""
    if d.expr is not None:
        return {s.name for s in d.expr.free_symbols}
    if d.solved_in is not None:  # read from the picked row of that variable's candidate table
        return {d.solved_in}
    if d.search is None:
        return set()
    found = d.search
    reads = {s.name for e in (found.test, *found.checks, *(r.residual for r in found.roots)) for s in e.free_symbols}
    for name in found.columns:
        expr = rows[name].expr
        reads |= {s.name for s in expr.free_symbols} if expr is not None else set()
    return reads - set(found.columns)


def _first_read(derived: list[Derived], names: list[str]) -> list[str]:
    """``names`` (inputs the trace does not list: what a formula needs that the solver folded) in the
    order the derived rows first read them, each row's names alphabetically; the rest as given.

    The trace's order of computed steps can vary between processes (a loop's blocks come from set
    iteration), so it must not decide where an input goes: the derived order is fixed.
    """
    by_name = {d.var.name: d for d in derived}
    wanted = set(names)
    out: list[str] = []
    for d in derived:
        out += [n for n in sorted(_row_reads(d, by_name)) if n in wanted and n not in out]
    return out + [n for n in names if n not in out]


def typed_input(inp: Input, var: Variable, base: float, typed: str | None) -> Input:
    """``inp`` shown in the unit the user typed: ``"300 request/hour"`` -> 300 request/hour.

    The sheet keeps what was typed (the formulas convert through the scale); the model's
    display unit stays when nothing was typed, the text has no unit, or its unit leaves a
    count implied (``"8192 token"`` for token/user) -- then the two units differ in name only.
    """
    if typed is None or var.choices or inp.preset is not None or isinstance(inp.value, str):
        return inp
    try:
        number, info = parse_quantity(typed, variable=var.name)
    except (ValueError, ConcurError):
        return inp
    if not info.text or info.text == var.display.text or info.dims != var.unit.dims or info.factor <= 0:
        return inp
    value = base / info.factor
    if math.isclose(number, value, rel_tol=1e-9):
        value = number
    lo, hi = var.bounds
    same = math.isclose(info.factor, var.display.factor, rel_tol=1e-12)
    sv = SheetVar(
        var.name,
        info.text,
        info.factor,
        var.doc,
        integer=var.integer and same,
        bounds=(None if lo is None else lo / info.factor, None if hi is None else hi / info.factor),
    )
    return Input(sv, value, preset=inp.preset, source=inp.source)


def plan_from_solution(
    sol: Solution,
    title: str,
    sweeps: Iterable[Sweep] = (),
    scenarios: Iterable[Scenario] = (),
    doc: str | None = None,
    search_up_to: int | None = None,
) -> WorkbookPlan:
    """A live-workbook plan reproducing ``sol``: its inputs, presets and every computed step.

    ``sweeps`` and ``scenarios`` are passed through (values in display units); ``search_up_to``
    is the largest candidate of a searched integer's table (:func:`concur.excel.live_search.make_live`).
    Raises :class:`UsageError` when a trace step cannot be expressed (no
    closed form reproduces the solver's value).

        >>> from concur.api import solve
        >>> sol = solve(find="users", given={"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb",
        ...                                  "tp": 4, "context": "8192 token"})
        >>> plan = plan_from_solution(sol, "KV cache")
        >>> plan.found, plan.derived[-1].var.name, plan.derived[-1].expr
        (('users',), 'users', dp_attention*floor((kv_tokens - prefix_held)/(effective_context - prefix_held)))
    """
    b = _Builder(sol)
    computed = [s for s in sol.trace if s.method not in _INPUT_METHODS]
    for step in sol.trace:
        if step.method in _INPUT_METHODS:
            b.add_input(step.variable, step.method, step.note)
    b.branch_closure()
    for step in computed:
        b.add_step(step)
    for name, i in list(b.extra.items()):
        b.add_step(Step(name, b.values[name], Method.FORWARD, i))
    presets = b.presets()
    bounds = {n: v.bounds for n, v in sol.model.variables.items()}
    rows, why = make_live(b.derived, b.candidates, b.values, bounds, search_up_to)
    derived = _stable_order(rows, list(sol.model.variables))
    order = [s.variable for s in sol.trace if s.variable in b.inputs]
    order += _first_read(derived, [n for n in b.inputs if n not in order])
    inputs = [
        b.inputs[n]
        if n in b.typed
        else typed_input(b.inputs[n], sol.model.variables[n], sol.values[n], sol.givens.texts.get(n))
        for n in order
    ]
    notes = list(sol.notes) + why
    if sol.model.constraints:
        notes.append("not checked in the sheet: " + "; ".join(c.text for c in sol.model.constraints))
    pack_doc = " ".join(sol.model.packs[0].doc.split()) if sol.model.packs else ""
    texts = {b.targets.get(k, k): v for k, v in sol.givens.texts.items()}
    return WorkbookPlan(
        title=title,
        doc=doc if doc is not None else pack_doc,
        inputs=inputs,
        presets=presets,
        derived=derived,
        sweeps=list(sweeps),
        scenarios=list(scenarios),
        notes=notes,
        givens_text=texts,
        found=tuple(sol.find),
    )
