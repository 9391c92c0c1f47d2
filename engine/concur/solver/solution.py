"""A solution: values in base units, the trace of how each was obtained, and the givens.

``Solution.value(name, unit)`` converts to any unit of the right dimension; ``sol[name]``
is a ``pint.Quantity`` in the variable's display unit; ``to_json()`` is the shape the CLI's
``--json`` prints (``{"results": ..., "given": ..., "trace": [...]}``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UnknownNameError, UsageError
from ..lang.model import Model

__all__ = ["Step", "Givens", "Solution", "show_value", "describe_var", "REL_TOL"]

REL_TOL = 1e-6


@dataclass(frozen=True)
class Step:
    """How one value was obtained. ``value`` is in base units."""

    variable: str
    value: float
    method: str  # given | preset | default | equation | inverted | search | numeric
    equation: str = ""
    where: str = ""
    note: str = ""


@dataclass
class Givens:
    values: dict[str, float]
    sources: dict[str, str]  # name -> "given" | "preset gpu=h100-sxm-80gb"
    limits: dict[str, str]  # given names that are targets to meet -> at_least/at_most
    texts: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how a given was read ("8k" = 8,000, not 8,192)


@dataclass
class Solution:
    """The answer: ``values`` (base units) for every variable computed, the trace, the givens."""

    model: Model
    find: tuple[str, ...]
    values: dict[str, float]
    givens: Givens
    trace: list[Step]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.notes[:0] = [n for n in self.givens.notes if n not in self.notes]

    def value(self, name: str, unit: str | None = None) -> float:
        """The value of ``name`` in ``unit`` (default: the variable's display unit)."""
        var = self.model.variable(name)
        if name not in self.values:
            raise UnknownNameError(f"'{name}' was not computed in this solution")
        if var.choices:
            return self.values[name]
        if unit is None:
            return self.values[name] / var.display.factor
        from ..lang.units import unit_info

        info = unit_info(unit, variable=name)
        if info.dims != var.unit.dims:
            raise UsageError(f"'{unit}' does not fit {name}'s unit '{var.unit.text}'", variable=name)
        return self.values[name] / info.factor

    def display_unit(self, name: str) -> str:
        return self.model.variable(name).display.text

    def __getitem__(self, name: str) -> Any:
        """``pint.Quantity`` in the display unit."""
        from ..lang.units import registry

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

    def to_json(self) -> dict[str, Any]:
        given = {}
        for name, base in self.givens.values.items():
            if name not in self.model.variables:
                continue
            var = self.model.variables[name]
            given[name] = {"value": var.choices[int(base)] if var.choices else base / var.display.factor,
                           "unit": var.display.text, "source": self.givens.sources.get(name, "given")}
        trace = []
        for s in self.trace:
            var = self.model.variables[s.variable]
            trace.append({"variable": s.variable,
                          "value": var.choices[int(s.value)] if var.choices else s.value / var.display.factor,
                          "unit": var.display.text, "method": s.method, "equation": s.equation, "where": s.where,
                          **({"note": s.note} if s.note else {})})
        return {"results": self.results(), "given": given, "trace": trace, "notes": list(self.notes)}



def show_value(model: Model, name: str, base: float) -> str:
    var = model.variables[name]
    if var.choices:
        return var.choices[int(base)]
    return f"{base / var.display.factor:.6g}{(' ' + var.display.text) if var.display.text else ''}"


def describe_var(model: Model, name: str) -> str:
    var = model.variables[name]
    unit = f" [{var.display.text}]" if var.display.text else ""
    return f"{name}{unit}"
