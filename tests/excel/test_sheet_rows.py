"""Candidate-table rows kept as XML (concur.excel.sheet_rows) read back as the cells openpyxl writes.

Every shipped workbook definition with a searched answer is exported twice: as shipped (the
tables' rows after the first spliced in as XML) and with every row an openpyxl cell. Every cell
of every sheet must read back alike: value or formula, type, number format, font, fill, border,
alignment, protection; and each sheet's dimension, merged cells and defined names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

openpyxl = pytest.importorskip("openpyxl")

from concur.errors import UsageError  # noqa: E402
from concur.excel import search  # noqa: E402
from concur.excel.cells import reproducible  # noqa: E402
from concur.excel.definition import export_definition, load_definition  # noqa: E402
from concur.excel.sheet_rows import SheetRows, splice  # noqa: E402

WORKBOOKS = Path(__file__).resolve().parents[2] / "workbooks"
SEARCHED = [p for p in sorted(WORKBOOKS.glob("*.yaml")) if p.stem in {"llm_fleet", "staffing"}]


def _read(path: Path) -> dict[str, Any]:
    wb = openpyxl.load_workbook(path)
    out: dict[str, Any] = {"names": {n: d.attr_text for n, d in wb.defined_names.items()}}
    for ws in wb.worksheets:
        cells = {}
        for row in ws.iter_rows():
            for c in row:
                if c.value is None and not c.has_style:
                    continue
                cells[c.coordinate] = (
                    c.value,
                    c.data_type,
                    c.number_format,
                    repr(c.font),
                    repr(c.fill),
                    repr(c.border),
                    repr(c.alignment),
                    repr(c.protection),
                )
        out[ws.title] = (ws.dimensions, sorted(str(m) for m in ws.merged_cells.ranges), cells)
    return out


def test_the_shipped_searches_are_among_the_definitions() -> None:
    assert [p.stem for p in SEARCHED] == ["llm_fleet", "staffing"]
    for path in SEARCHED:
        assert load_definition(path).find


@pytest.mark.parametrize("definition", SEARCHED, ids=lambda p: p.stem)
def test_rows_kept_as_xml_read_back_as_openpyxl_cells(
    definition: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spliced = _read(export_definition(definition, tmp_path / "spliced.xlsx"))
    monkeypatch.setattr(search, "_CELL_ROWS", 10**9)
    cells = _read(export_definition(definition, tmp_path / "cells.xlsx"))
    assert list(spliced) == list(cells)
    searched = [t for t in cells if t.startswith("Search ")]
    assert searched, f"{definition.name} has no Search sheet"
    for title in searched:
        assert len(cells[title][2]) > 100, "a table of a few rows would not test the splice"
    assert spliced.pop("names") == cells.pop("names")
    for title, (dimension, merged, got) in spliced.items():
        want_dimension, want_merged, want = cells[title]
        assert (dimension, merged) == (want_dimension, want_merged), title
        differ = sorted(set(got) ^ set(want)) + sorted(k for k in got if k in want and got[k] != want[k])
        assert not differ, f"{definition.stem}, sheet {title}: {differ[:5]}"


def _sheet(tmp_path: Path) -> tuple[Any, Any]:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "T"
    ws.cell(1, 1, "head")
    styled = ws.cell(2, 1, 7)
    styled.number_format = "#,##0"
    return wb, ws


def test_a_table_round_trips_with_styles_escapes_and_a_grown_dimension(tmp_path: Path) -> None:
    wb, ws = _sheet(tmp_path)
    rows = SheetRows(ws)
    style = rows.style_of(ws.cell(2, 1))
    assert style.startswith(' s="')
    template = rows.template([(1, "#N", style), (3, 'IF(A#R<2,"a&b",A#R>#P)', "")], "#R", "#N")
    rows.add(template, 3, {"#R": 3, "#N": 8, "#P": 2})
    rows.add(template, 5, {"#R": 5, "#N": 9, "#P": 4})
    path = tmp_path / "t.xlsx"
    wb.save(path)
    path.write_bytes(reproducible(path.read_bytes(), [rows]))
    back = openpyxl.load_workbook(path)["T"]
    assert back.dimensions == "A1:C5"
    assert (back["A3"].value, back["A3"].number_format, back["A5"].value) == (8, "#,##0", 9)
    assert back["C3"].value == '=IF(A3<2,"a&b",A3>2)' and back["C3"].data_type == "f"
    assert back["C5"].value == '=IF(A5<2,"a&b",A5>4)'
    assert back["A4"].value is None and back["B5"].value is None


def test_rows_or_columns_out_of_order_or_over_openpyxl_rows_are_refused(tmp_path: Path) -> None:
    wb, ws = _sheet(tmp_path)
    rows = SheetRows(ws)
    with pytest.raises(RuntimeError, match="column 1 after column 2"):
        rows.template([(2, "1", ""), (1, "2", "")], "#R", "#N")
    template = rows.template([(2, "#N", "")], "#R", "#N")
    rows.add(template, 4, {"#R": 4, "#N": 1})
    with pytest.raises(RuntimeError, match="row 4 after row 4"):
        rows.add(template, 4, {"#R": 4, "#N": 1})
    over = SheetRows(ws)
    over.add(template, 2, {"#R": 2, "#N": 1})
    with pytest.raises(RuntimeError, match="openpyxl writes row 2"):
        splice(b'<worksheet><dimension ref="A1:A2" /><sheetData></sheetData></worksheet>', over)
    wb.save(tmp_path / "t.xlsx")
    elsewhere = SheetRows(openpyxl.Workbook().active)  # a sheet of another workbook
    elsewhere.add(template, 1, {"#R": 1, "#N": 1})
    with pytest.raises(RuntimeError, match="sheets the workbook does not have"):
        reproducible((tmp_path / "t.xlsx").read_bytes(), [elsewhere])


def test_bad_formulas_are_refused_like_put_formula(tmp_path: Path) -> None:
    _, ws = _sheet(tmp_path)
    rows = SheetRows(ws)
    with pytest.raises(UsageError, match="must not start with '='"):
        rows.template([(1, "=A1", "")], "#R", "#N")
    with pytest.raises(UsageError, match="control characters"):
        rows.template([(1, "A1\x01", "")], "#R", "#N")


def test_an_empty_sheet_data_takes_the_rows() -> None:
    wb = openpyxl.Workbook()
    rows = SheetRows(wb.active)
    rows.add(rows.template([(1, "#N", "")], "#R", "#N"), 1, {"#R": 1, "#N": 3})
    xml = splice(b'<worksheet><dimension ref="A1" /><sheetData /></worksheet>', rows)
    assert xml == (
        b'<worksheet><dimension ref="A1:A1" /><sheetData><row r="1"><c r="A1" t="n"><v>3</v></c></row>'
        b"</sheetData></worksheet>"
    )
