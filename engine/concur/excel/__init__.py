"""Live Excel workbooks: plan -> xlsx with formulas, recalculated by LibreOffice in tests.

``write_workbook(plan, path)`` is the entry point; the plan dataclasses are in
:mod:`concur.excel.plan`. openpyxl and sympy are imported only when a name
that needs them is used.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Derived",
    "Input",
    "PresetChoice",
    "Scenario",
    "Search",
    "SheetVar",
    "Sweep",
    "WorkbookPlan",
    "excel_formula",
    "recalculate",
    "recalculate_values",
    "set_inputs",
    "snap",
    "write_workbook",
]

_WHERE = {
    "write_workbook": "writer",
    "recalculate": "recalc",
    "recalculate_values": "recalc",
    "set_inputs": "recalc",
    "snap": "printer",
    "excel_formula": "printer",
    "SheetVar": "plan",
    "Input": "plan",
    "PresetChoice": "plan",
    "Derived": "plan",
    "Sweep": "plan",
    "Scenario": "plan",
    "Search": "plan",
    "WorkbookPlan": "plan",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        module = importlib.import_module(f"{__name__}.{_WHERE[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
