"""Regenerate the shipped unit table: ``python -m concur.lang.unit_table``.

:mod:`concur.lang.units` answers unit lookups from ``lang/data/units-table.json`` -- pint's answers
for every unit text the shipped packs and catalogs use, computed once here -- so a warm question
never imports pint. This tool loads and checks every shipped pack and catalog, collects the unit
texts they asked for, adds :data:`~concur.lang.units.COMMON_UNITS`, and writes pint's factor and
dimensions for each. It sits above the pack loader and the checker it drives; the lookup module
below them knows nothing of it. ``tests/lang/test_units.py`` fails when the table lacks a unit
the packs use, naming this command.
"""

from __future__ import annotations

import json
from pathlib import Path

from .check import check_model
from .library import formulas_dir
from .model import build_model
from .pack import load_catalog, load_pack
from .units import COMMON_UNITS, SHIPPED_TABLE, forget_units_asked, table_rows, units_asked

__all__ = ["shipped_unit_texts", "write_shipped_table"]


def shipped_unit_texts() -> list[str]:
    """Every unit text that loading and checking the shipped packs and catalogs asks for
    (variables, bracket literals, defaults, example values), plus :data:`COMMON_UNITS`."""
    forget_units_asked()
    root = formulas_dir()
    for path in sorted(root.glob("*.yaml")):
        load_pack(path)
        check_model(build_model([str(path)]))
    for path in sorted((root / "catalogs").glob("*.yaml")):
        load_catalog(path)
    return sorted(set(COMMON_UNITS) | {t for t in units_asked() if t})


def write_shipped_table() -> Path:
    """Regenerate :data:`~concur.lang.units.SHIPPED_TABLE` from pint."""
    rows = table_rows(shipped_unit_texts())
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in rows.items()]
    SHIPPED_TABLE.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return SHIPPED_TABLE


if __name__ == "__main__":
    print(f"wrote {write_shipped_table()}")
