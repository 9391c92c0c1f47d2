"""From a solved scenario to a :class:`~concur.excel.plan.WorkbookPlan`.

How is this designed, and why?
------------------------------
The solver already knows everything a live workbook needs: its trace lists
every value it used, in dependency order, with how each was obtained
(``given``, ``preset``, ``default``, ``equation``, ``inverted``, ``numeric``,
``loop``, ``search``). :func:`plan_from_solution` walks that trace once:

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
  solver's value); ``numeric``, ``loop`` and ``search`` steps have no closed
  form and become *implicit* rows (the solved value plus a residual that is 0
  at the solution; for a search, the goal minus its target).
* ``if_`` on a choice (``attention == "mla"``) is kept live when every name of
  both branches has a value, and printed as ``IF(attention="mla",...)``: the
  choice variable becomes a list-validated input. A branch that needs a value
  the scenario never had is folded to the branch the solver took.

Worked example (DESIGN T1): ``concur export llm_memory --find users
--set model=llama-3.1-70b --set gpu=h100-sxm-80gb --set tp=4 ...`` gives 16
inputs (params 70.55 Gparameter, gpu_memory 79.18 GiB, ... from the model and
gpu presets, tp 4, context 8192 token/user, attention gqa, block_size 16 from
defaults) and 8 derived rows ending in ``users = floor(kv_tokens/context)``;
LibreOffice recalculates ``users`` to 55, and to 162 after typing 8 into tp.

A given keeps the unit it was typed in (:func:`typed_input`): ``arrival_rate: 300
request/hour`` shows 300 with unit request/hour, not 0.0833 request/s.

Consequences: the workbook answers *the same question* for other inputs; it
does not re-plan. If an edit makes a different equation direction or a
different branch of a folded ``if_`` necessary, re-export. A searched value
(smallest tp for 100 users) stays a number with its residual beside it.

Non-goals: constraints (``attention_heads % tp == 0``) are not turned into
cells; catalog text fields (a model's ``attention``) do not follow the preset
dropdown -- the choice cell is its own input.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import sympy

from ..errors import UsageError
from ..lang.expr import If, Node, Var, compile_node, map_tree, names_in
from ..lang.model import Model
from ..lang.pack import Equation, Variable
from ..solver.solution import Method, Solution, Step
from ..solver.symbolic import to_sympy
from .plan import Derived, Input, PresetChoice, Scenario, SheetVar, Sweep, WorkbookPlan

__all__ = ["plan_from_solution", "sheet_var", "display_value", "typed_input"]

_INPUT_METHODS = (Method.GIVEN, Method.PRESET, Method.DEFAULT)
_COMPUTED_METHODS = (Method.FORWARD, Method.INVERTED, Method.NUMERIC, Method.LOOP, Method.TEAR,
                     Method.INTEGER_TEAR)


def sheet_var(var: Variable) -> SheetVar:
    """The sheet's view of ``var``: display unit, scale, doc, display-unit bounds."""
    scale = float(var.display.factor)
    lo, hi = var.bounds
    bounds = (None if lo is None else lo / scale, None if hi is None else hi / scale)
    return SheetVar(var.name, var.display.text, scale, var.doc, integer=var.integer, bounds=bounds,
                    choices=tuple(var.choices))


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
        raise UsageError(f"the trace step for '{step.variable}' names no equation of the model",
                         variable=step.variable, hint="export the solution from the model that produced it")
    return model.equations[step.eq]


def _fold(node: Node, known: dict[str, float], available: set[str]) -> Node:
    """Fold each ``if_`` whose branches need a name without a value (keep the rest live)."""
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
        computed = {s.variable for s in sol.trace if s.method in _COMPUTED_METHODS}
        self.known = {k: v for k, v in sol.values.items() if k not in computed}
        self.available = set(sol.values)
        self.preset_of: dict[str, tuple[str, str]] = {}  # variable -> (preset key, id)
        self.sources: dict[str, str] = {}

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
        if method == "preset" and note.startswith("preset ") and "=" in note and not var.choices:
            key, ident = note[len("preset "):].split("=", 1)
            self.preset_of[name] = (key, ident)
            preset = key
        source = {"default": "pack default", "given": "given"}.get(method, note or method)
        self.inputs[name] = Input(sheet_var(var), value, preset=preset, source=source)
        self.have.add(name)

    def expr_of(self, node: Node, owner: str) -> sympy.Expr:
        """sympy form of ``node``; any name not yet on the sheet is added as an input."""
        for name in sorted(names_in(node)):
            if name not in self.have:
                if name not in self.sol.values:
                    raise UsageError(f"'{owner}' needs '{name}', which the solution has no value for",
                                     variable=owner, hint="give it with --set")
                src = self.sol.givens.sources.get(name, "")
                method = "preset" if src.startswith("preset") else ("given" if src == "given" else "default")
                self.add_input(name, method, src)
        return to_sympy(node, {n: self.sym(n) for n in names_in(node)})

    def add_step(self, step: Step) -> None:
        var = self.model.variables[step.variable]
        sv = sheet_var(var)
        value = display_value(var, step.value)
        if step.method == "search":
            goal = next((g for g in self.sol.givens.limits if g in self.sol.givens.values), None)
            goal = goal or next((g for g in self.sol.givens.values
                                 if self.sol.givens.sources.get(g) == "given" and g not in self.known), None)
            residual = None
            if goal is not None:
                residual = self.sym(goal) - sympy.Float(self.sol.givens.values[goal], 17)
            self.derived.append(Derived(sv, None, f"search: {step.note}", "search", value,
                                        implicit=True, residual=residual))
            self.have.add(step.variable)
            return
        eq = _equation(self.model, step)
        where = str(eq.where)
        if step.method is Method.FORWARD:
            lhs, rhs = _fold(eq.lhs, self.known, self.available), _fold(eq.rhs, self.known, self.available)
            side = rhs if isinstance(lhs, Var) and lhs.name == step.variable else lhs
            expr = _choice_text(self.expr_of(side, step.variable), self._choices())
            self.derived.append(Derived(sv, expr, eq.text, where, value))
        elif step.method in (Method.INVERTED, Method.LOOP) and self._closed_form(step) is not None:
            expr = _choice_text(self.expr_of(self._closed_form(step), step.variable), self._choices())  # type: ignore[arg-type]
            label = "  (inverted)" if step.method is Method.INVERTED else "  (loop, closed form)"
            self.derived.append(Derived(sv, expr, eq.text + label, where, value))
        else:  # numeric, torn loops: implicit, residual lhs - rhs
            from ..solver.problem import fold_known as solver_fold

            lhs, rhs = solver_fold(eq.lhs, self.known), solver_fold(eq.rhs, self.known)
            others = (names_in(lhs) | names_in(rhs)) - {step.variable}
            residual = None
            if all(n in self.sol.values for n in others):
                for n in sorted(others):
                    if n not in self.have and n not in self._computed_names():
                        self.add_input(n, "default")
                residual = to_sympy(lhs, self._all_symbols(lhs)) - to_sympy(rhs, self._all_symbols(rhs))
            self.derived.append(Derived(sv, None, eq.text + f"  ({step.method})", where, value,
                                        implicit=True, residual=residual))
        self.have.add(step.variable)

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

    def _computed_names(self) -> set[str]:
        return {s.variable for s in self.sol.trace if s.method in _COMPUTED_METHODS or s.method is Method.SEARCH}

    def _all_symbols(self, node: Node) -> dict[str, sympy.Symbol]:
        return {n: self.sym(n) for n in names_in(node)}

    def _choices(self) -> dict[str, tuple[str, ...]]:
        return {n: v.choices for n, v in self.model.variables.items() if v.choices}

    def presets(self) -> list[PresetChoice]:
        """One table per preset key that filled an input, over the whole catalog."""
        from ..lang.library import get_catalog
        from ..lang.values import count_factor

        out: list[PresetChoice] = []
        keys: dict[str, str] = {}
        for name, (key, ident) in self.preset_of.items():
            keys.setdefault(key, ident)
        for key, selected in keys.items():
            chain = self.model.presets[key]
            catalog = get_catalog(chain[0].catalog)  # the dropdown lists the first catalog's entries
            table: dict[str, dict[str, float]] = {}
            sources: dict[str, dict[str, str]] = {}
            for preset in chain:
                extra = get_catalog(preset.catalog)
                for ident in catalog.entries:
                    entry = extra.entries.get(ident)
                    if entry is None:
                        continue
                    for fname, (fval, source, floc) in entry.values.items():
                        if preset.fields and fname not in preset.fields:
                            continue
                        target = preset.fields.get(fname, fname) if preset.fields else fname
                        if self.preset_of.get(target, ("", ""))[0] != key or ident in table.get(target, {}):
                            continue
                        if isinstance(fval, bool) or not isinstance(fval, (int, float)):
                            continue
                        var = self.model.variables[target]
                        base = float(fval) * extra.fields[fname].unit.factor * count_factor(
                            extra.fields[fname].unit, var, floc)
                        table.setdefault(target, {})[ident] = base / var.display.factor
                        sources.setdefault(target, {})[ident] = str(source)
            # An entry without a field (a dense model has no sliding_window) takes the variable's
            # default, as the solver would; only a field with no default stays empty (#N/A).
            for target, column in table.items():
                var = self.model.variables[target]
                if var.default is None:
                    continue
                for ident in catalog.entries:
                    if ident not in column:
                        column[ident] = var.default / var.display.factor
                        sources.setdefault(target, {})[ident] = f"not in the catalog: {target}'s default"
            out.append(PresetChoice(key, chain[0].catalog, selected, tuple(catalog.entries), table, sources))
            for name, (k, ident) in self.preset_of.items():
                if k == key and name in self.inputs:
                    cite = sources.get(name, {}).get(ident, "")
                    inp = self.inputs[name]
                    self.inputs[name] = Input(inp.var, inp.value, preset=key,
                                              source=f"{key}={ident}: {cite}" if cite else f"preset {key}={ident}")
        return out


def _stable_order(rows: list[Derived], declared: list[str]) -> list[Derived]:
    """Topological order of ``rows`` with ties broken by declaration order.

    The solver's block order can vary between processes (set iteration), but
    a committed workbook must be byte-for-byte reproducible in content, so the
    plan fixes one order: a row comes after every row its expression uses.
    """
    import heapq

    rank = {name: i for i, name in enumerate(declared)}
    by_name = {d.var.name: d for d in rows}
    deps = {d.var.name: ({s.name for s in d.expr.free_symbols} & by_name.keys()) - {d.var.name}
            if d.expr is not None else set() for d in rows}
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


def typed_input(inp: Input, var: Variable, base: float, typed: str | None) -> Input:
    """``inp`` shown in the unit the user typed: ``"300 request/hour"`` -> 300 request/hour.

    The sheet keeps what was typed (the formulas convert through the scale); the model's
    display unit stays when nothing was typed, the text has no unit, or its unit leaves a
    count implied (``"8192 token"`` for token/user) -- then the two units differ in name only.
    """
    from ..errors import ConcurError
    from ..lang.units import parse_quantity

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
    sv = SheetVar(var.name, info.text, info.factor, var.doc, integer=var.integer and same,
                  bounds=(None if lo is None else lo / info.factor, None if hi is None else hi / info.factor))
    return Input(sv, value, preset=inp.preset, source=inp.source)


def plan_from_solution(sol: Solution, title: str, sweeps: Iterable[Sweep] = (),
                       scenarios: Iterable[Scenario] = (), doc: str | None = None) -> WorkbookPlan:
    """A live-workbook plan reproducing ``sol``: its inputs, presets and every computed step.

    ``sweeps`` and ``scenarios`` are passed through (values in display units).
    Raises :class:`UsageError` when a trace step cannot be expressed (no
    closed form reproduces the solver's value).

        >>> from concur.api import solve  # doctest: +SKIP
        >>> plan = plan_from_solution(solve(find="users", given={...}), "KV cache")  # doctest: +SKIP
    """
    b = _Builder(sol)
    computed = [s for s in sol.trace if s.method not in _INPUT_METHODS]
    for step in sol.trace:
        if step.method in _INPUT_METHODS:
            b.add_input(step.variable, step.method, step.note)
    for step in computed:
        b.add_step(step)
    presets = b.presets()
    derived = _stable_order(b.derived, list(sol.model.variables))
    order = [s.variable for s in sol.trace if s.variable in b.inputs]
    order += [n for n in b.inputs if n not in order]
    inputs = [typed_input(b.inputs[n], sol.model.variables[n], sol.values[n], sol.givens.texts.get(n))
              for n in order]
    notes = list(sol.notes)
    if sol.model.constraints:
        notes.append("not checked in the sheet: " + "; ".join(c.text for c in sol.model.constraints))
    pack_doc = " ".join(sol.model.packs[0].doc.split()) if sol.model.packs else ""
    return WorkbookPlan(title=title, doc=doc if doc is not None else pack_doc, inputs=inputs, presets=presets,
                        derived=derived, sweeps=list(sweeps), scenarios=list(scenarios), notes=notes,
                        givens_text=dict(sol.givens.texts), found=tuple(sol.find))
