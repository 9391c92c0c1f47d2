"""A solution: values in base units, the trace of how each was obtained, and the givens.

``Solution.value(name, unit)`` converts to any unit of the right dimension; ``sol[name]``
is a ``pint.Quantity`` in the variable's display unit; ``to_json()`` is the shape the CLI's
``--json`` prints (``{"results": ..., "given": ..., "assumed": ..., "trace": [...]}``); ``assumed``
lists the stated defaults and catalog values the answer used (:mod:`concur.solver.assumed`), each
also a note under the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UnknownNameError, UsageError
from ..lang.model import Model
from ..lang.pack import Equation
from ..lang.units import registry, unit_info
from .assumed import Assumption, assumptions
from .givens import Givens
from .html import html_number, html_table
from .plan import Method, Plan, Step

__all__ = ["Solution", "list_names", "show_value"]


@dataclass
class Solution:
    """The answer: ``values`` (base units) for every variable computed, the trace, the givens."""

    model: Model
    find: tuple[str, ...]
    values: dict[str, float]
    givens: Givens
    trace: list[Step]
    notes: list[str] = field(default_factory=list)
    plan: Plan | None = None  # the plan whose run gave the values (the exporter prints its forms)
    assumed: list[Assumption] = field(default_factory=list, init=False)  # what the answer took unasked

    def __post_init__(self) -> None:
        self.assumed = assumptions(self.model, self.values, self.givens, self.trace)
        stated = [a.note for a in self.assumed if a.note]
        self.notes[:0] = [n for n in dict.fromkeys(self.givens.notes + stated) if n not in self.notes]

    def equation(self, step: Step) -> Equation | None:
        """The model equation that gave ``step`` (None for inputs)."""
        return None if step.eq is None else self.model.equations[step.eq]

    def equation_text(self, step: Step) -> str:
        eq = self.equation(step)
        return "" if eq is None else eq.text

    def where(self, step: Step) -> str:
        eq = self.equation(step)
        return "" if eq is None else str(eq.where)

    def value(self, name: str, unit: str | None = None) -> float:
        """The value of ``name`` in ``unit`` (default: the variable's display unit)."""
        var = self.model.variable(name)
        if name not in self.values:
            raise UnknownNameError(f"'{name}' was not computed in this solution")
        if var.choices:
            return self.values[name]
        if unit is None:
            return self.values[name] / var.display.factor
        info = unit_info(unit, variable=name)
        if info.dims != var.unit.dims:
            raise UsageError(f"'{unit}' does not fit {name}'s unit '{var.unit.text}'", variable=name)
        return self.values[name] / info.factor

    def display_unit(self, name: str) -> str:
        return self.model.variable(name).display.text

    def __getitem__(self, name: str) -> Any:
        """``pint.Quantity`` in the display unit."""
        var = self.model.variable(name)
        if var.choices:
            return var.choices[int(self.values[name])]
        return registry().Quantity(self.value(name), var.display.text or "dimensionless")

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def results(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in self.find:
            var = self.model.variable(name)
            value: Any = self.value(name)
            if var.choices:
                value = var.choices[int(value)]
            elif var.integer and float(value).is_integer():
                value = int(value)
            out[name] = {"value": value, "unit": var.display.text}
        return out

    def _repr_html_(self) -> str:
        """A notebook table: each result with its unit and the equation (and file:line) that gave it."""
        by_var = {s.variable: s for s in self.trace}
        rows = []
        for name, res in self.results().items():
            step = by_var.get(name)
            how = ""
            if step is not None:
                how = step.note if step.method in (Method.SEARCH, Method.INTEGER_TEAR) else self.equation_text(step)
                how = how or step.method.value
                if step.eq is not None and step.method not in (Method.SEARCH, Method.INTEGER_TEAR):
                    how += f"  [{self.where(step)}]"
            rows.append([name, html_number(res["value"], res["unit"]), how])
        return html_table(
            ["name", "value", "how"],
            rows,
            caption=" + ".join(self.model.pack_names),
            notes=[f"note: {n}" for n in self.notes],
        )

    def to_json(self) -> dict[str, Any]:
        versions = self.givens.versions  # engine=vllm@0.10 is given as typed (the release beside the id)
        given: dict[str, Any] = {
            key: {
                "value": f"{ident}@{versions[key][0]}" if key in versions and versions[key][1] else ident,
                "unit": "",
                "source": "preset",
            }
            for key, ident in self.givens.presets.items()
        }
        for name, base in self.givens.values.items():
            if name not in self.model.variables:
                continue
            var = self.model.variables[name]
            given[name] = {
                "value": var.choices[int(base)] if var.choices else base / var.display.factor,
                "unit": var.display.text,
                "source": self.givens.sources.get(name, "given"),
                **({"typed": self.givens.texts[name]} if name in self.givens.texts else {}),
            }
        trace = []
        for s in self.trace:
            var = self.model.variables[s.variable]
            trace.append(
                {
                    "variable": s.variable,
                    "value": var.choices[int(s.value)] if var.choices else s.value / var.display.factor,
                    "unit": var.display.text,
                    "method": s.method.value,
                    "equation": self.equation_text(s),
                    "where": self.where(s),
                    **({"note": s.note} if s.note else {}),
                }
            )
        return {
            "results": self.results(),
            "given": given,
            "assumed": {a.name: a.to_json() for a in self.assumed},
            "trace": trace,
            "notes": list(self.notes),
        }


def show_value(model: Model, name: str, base: float) -> str:
    var = model.variables[name]
    if var.choices:
        return var.choices[int(base)]
    return f"{base / var.display.factor:.6g}{(' ' + var.display.text) if var.display.text else ''}"


def list_names(names: list[str] | tuple[str, ...], limit: int = 16) -> str:
    """Names for a one-line message: all of them up to ``limit``, else the first eight and a count
    (a loop of 300 unknowns is named, not listed)."""
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:8])} and {len(names) - 8} more"
